"""The offsets of a segment's intact entries, which their CRCs do not cover (docs/format.md §2, §4.1): checked
against what lies next to each entry in the file (whose order is the offset order in genuine data),
against the producer sequence numbers the CRC does cover, and put in the order a broker needs."""
from __future__ import annotations

import bisect

from kfmt.format.model import increment_sequence

from .facts import DUPLICATE, MISPLACED, OVERLAP, Found, SegmentScan, merge_ranges


def order_segment(scan: SegmentScan, buf) -> None:
    """Fill `scan.order` with the entries to write, in offset order, dropping those whose offsets
    cannot be trusted. The offset field is outside the CRC, so the offsets of an intact entry are
    checked against its neighbours in the file, whose order is the offset order in genuine data."""
    f = scan.found
    gaps = sum(_unexplained_gap(scan, i) for i in range(1, len(f)))
    broken = _sequence_breaks(scan)
    for i, (first, last) in broken.items():
        _drop_misplaced(scan, i, first, last, "the sequence numbers of its producer's batch next to it "
                                              "in the file say it follows that batch directly")
    keep = [i for i in range(len(f)) if i not in broken and not _misplaced(scan, i, gaps)]
    if all(f.bases[b] > f.lasts[a] for a, b in zip(keep, keep[1:])):
        scan.order = keep
        return
    chain = _longest_chain([f.bases[i] for i in keep], [f.lasts[i] for i in keep])
    kept = sorted((keep[c] for c in chain), key=lambda i: f.bases[i])
    in_chain = set(kept)
    for i in keep:
        if i in in_chain:
            continue
        at = bisect.bisect_left([f.bases[k] for k in kept], f.bases[i])
        before = kept[at - 1] if at > 0 else None
        after = kept[at] if at < len(kept) else None
        clash = [j for j in (before, after) if j is not None
                 and f.bases[j] <= f.lasts[i] and f.bases[i] <= f.lasts[j]]
        if clash and _entry(buf, f, i) == _entry(buf, f, clash[0]):
            scan.drop(i, DUPLICATE, f"an intact copy of {f.describe(clash[0])}, which is kept", [])
        elif not clash and ((before is not None and f.lasts[before] + 1 == f.bases[i])
                            or (after is not None and f.lasts[i] + 1 == f.bases[after])):
            kept.insert(at, i)
            scan.moved.append(f"{f.describe(i)} was out of offset order in the file; it is written "
                              f"where its offsets belong, next to the entries it continues")
        else:
            claimed = [(f.bases[i], f.lasts[i])]
            if clash:
                # Two different entries claim the same offsets and the CRC does not cover offsets:
                # which one is right cannot be known, so neither is kept.
                for j in clash:
                    kept.remove(j)
                    scan.drop(j, OVERLAP, f"intact, but {f.describe(i)} claims offsets it holds too",
                              [(f.bases[j], f.lasts[j])])
                    claimed.append((f.bases[j], f.lasts[j]))
                reason = f"intact, but it claims offsets held by {f.describe(clash[0])} as well"
            else:
                reason = ("intact, but out of offset order in the file and not adjacent to the entries "
                          "around its offsets: its offset field may be damaged")
            hole = scan.between(_previous(keep, i), _next(keep, i, len(f)))
            scan.drop(i, OVERLAP, reason, merge_ranges(claimed + hole))
    scan.order = kept


def _misplaced(scan: SegmentScan, i: int, gaps: int) -> bool:
    """An entry whose offset field (outside the CRC) is contradicted by the entries around it in the
    file: they leave room for exactly its offsets somewhere else; or it opens a gap right after what
    lies before it, nothing after it vouches for its offsets (for the segment's last entry: it does not
    end where the next segment, or the log, begins), in a segment whose other entries all follow each
    other without a gap (and none was compacted). Its records' offsets are then the room (in the
    second case, what it claims is reported too: the entries before it may have been cut out instead).
    `gaps`: the unexplained offset gaps between entries next to each other in the file."""
    f = scan.found
    span = f.lasts[i] - f.bases[i]
    room = scan.between(i - 1, i + 1)
    if room and room[0][1] is not None:
        first, last = room[0]
        if f.bases[i] != first and last - first == span:
            return _drop_misplaced(scan, i, first, last, "the entries around it leave room for exactly "
                                                         "its offsets")
    first, last = _room_next_to(scan, i)  # the same, with damaged neighbours' claims
    if first is not None and last is not None and f.bases[i] != first and last - first == span:
        return _drop_misplaced(scan, i, first, last, "what lies next to it in the file (damaged "
                                                     "entries' intact frames included) leaves room "
                                                     "for exactly its offsets")
    around = gaps - _unexplained_gap(scan, i) - _unexplained_gap(scan, i + 1)  # gaps elsewhere
    evidence = len(f) - 1 - (i > 0) - (i + 1 < len(f))  # pairs of entries that show the density
    # An entry that opens a gap right after what lies before it in the file (an intact entry, or a
    # damaged one's intact frame), in a segment whose other entries all follow each other (none
    # compacted), with nothing after it vouching for its offsets and the entries after it continuing
    # above them: its offset field is damaged, or the entries before it were cut out (the last entry
    # of a log that nothing bounds). Which cannot be told, so it is reported, what it claims too, and
    # not kept.
    following = scan.rng.next_base
    vouched = _vouched_after(scan, i) or (i + 1 == len(f) and f.lasts[i] + 1 == following)
    if (first is not None and f.bases[i] > first and not f.compacted and around == 0 and evidence > 0
            and not vouched and (i + 1 == len(f) or f.bases[i + 1] > f.lasts[i])
            and (following is None or first + span < following)):
        return _drop_misplaced(scan, i, first, first + span, "every other entry of the segment follows "
                                                             "the one before it without a gap", claimed=True)
    return False


def _sequence_breaks(scan: SegmentScan) -> dict[int, tuple[int, int]]:
    """Entries whose offset field the producer's sequence numbers (inside the CRC) contradict, with
    the offsets they must hold. Two batches next to each other in the file, of one producer epoch,
    whose sequences follow each other have nothing between them in that producer's stream nor in
    the file, so their offsets follow each other too (docs/format.md §4.1, §8). When they do not, the one whose
    other neighbour does not vouch for it has the damaged field."""
    f, out = scan.found, {}
    if f.compacted:  # the cleaner may have removed other producers' batches between them
        return out
    for i in range(len(f) - 1):
        j = i + 1
        if not (f.adjacent(i, j) and f.gap_before(j) and f.pids[i] >= 0 and f.pids[i] == f.pids[j]
                and f.producer_epochs[i] == f.producer_epochs[j] and f.first_seqs[i] >= 0
                and f.first_seqs[j] == increment_sequence(f.last_seqs[i], 1)):
            continue
        i_vouched, j_vouched = _vouched_before(scan, i), _vouched_after(scan, j)
        if i_vouched and not j_vouched:
            out[j] = (f.lasts[i] + 1, f.lasts[i] + 1 + f.lasts[j] - f.bases[j])
        elif j_vouched and not i_vouched:
            out[i] = (f.bases[j] - 1 - (f.lasts[i] - f.bases[i]), f.bases[j] - 1)
    return out


def _room_next_to(scan: SegmentScan, i: int) -> tuple[int | None, int | None]:
    """The first and last offsets entry i may hold by what lies right next to it in the file: an
    intact entry, or a damaged one whose frame is intact (its claim); None where nothing says."""
    f = scan.found
    stop = f.positions[i] + f.sizes[i]
    first = last = None
    if i > 0 and f.adjacent(i - 1, i):
        first = f.lasts[i - 1] + 1
    else:
        first = next((d.claim[1] + 1 for d in scan.dropped if d.end == f.positions[i] and d.claim), None)
    if i + 1 < len(f) and f.positions[i + 1] == stop:
        last = f.bases[i + 1] - 1
    else:
        last = next((d.claim[0] - 1 for d in scan.dropped if d.start == stop and d.claim), None)
    return first, last


def _unexplained_gap(scan: SegmentScan, i: int) -> bool:
    """Whether the offsets jump between found entries i - 1 and i (file order) with nothing between
    them claiming the offsets in between: a damaged entry whose intact frame claims them explains it."""
    return scan.found.gap_before(i) and not (_vouched_before(scan, i) and _vouched_after(scan, i - 1))


def _vouched_before(scan: SegmentScan, i: int) -> bool:
    """Whether what lies just before entry i in the file says its offsets begin where they do: the
    entry before it ending at the offset before, or a damaged entry with an intact frame claiming so."""
    f = scan.found
    if i > 0 and f.adjacent(i - 1, i):
        return not f.gap_before(i)
    return any(d.end == f.positions[i] and d.claim is not None and d.claim[1] + 1 == f.bases[i]
               for d in scan.dropped)


def _vouched_after(scan: SegmentScan, j: int) -> bool:
    """Whether what lies just after entry j in the file says its offsets end where they do."""
    f = scan.found
    stop = f.positions[j] + f.sizes[j]
    if j + 1 < len(f) and f.positions[j + 1] == stop:
        return not f.gap_before(j + 1)
    if (j + 1 == len(f) and scan.rng.next_base == f.lasts[j] + 1
            and not any(d.start == stop for d in scan.dropped)):
        return True
    return any(d.start == stop and d.claim is not None and d.claim[0] == f.lasts[j] + 1 for d in scan.dropped)


def _drop_misplaced(scan: SegmentScan, i: int, first: int, last: int, why: str,
                    claimed: bool = False) -> bool:
    f = scan.found
    offsets = [(first, last)] + ([(f.bases[i], f.lasts[i])] if claimed else [])
    scan.drop(i, MISPLACED, f"intact, but its offset field says {f.bases[i]}..{f.lasts[i]} where {why}, "
              f"at {first}..{last}: the field (outside the CRC) is damaged", merge_ranges(offsets))
    return True


def _previous(indices: list[int], i: int) -> int:
    at = indices.index(i)
    return indices[at - 1] if at > 0 else -1


def _next(indices: list[int], i: int, count: int) -> int:
    at = indices.index(i)
    return indices[at + 1] if at + 1 < len(indices) else count


def _entry(buf, found: Found, i: int) -> bytes:
    start = found.positions[i]
    return bytes(buf[start:start + found.sizes[i]])


def _longest_chain(bases, lasts) -> list[int]:
    """The indices of a longest run of entries, in file order, whose offsets strictly increase
    (each starts after the previous one ends): the entries that agree with the file's order."""
    tails: list[int] = []  # tails[k]: the smallest last offset ending a chain of length k + 1
    tail_index: list[int] = []
    previous = [-1] * len(bases)
    for i, (base, last) in enumerate(zip(bases, lasts)):
        k = bisect.bisect_left(tails, base)  # chains whose last offset is below this entry's base
        previous[i] = tail_index[k - 1] if k else -1
        if k == len(tails):
            tails.append(last)
            tail_index.append(i)
        elif last < tails[k]:
            tails[k], tail_index[k] = last, i
    chain, i = [], tail_index[-1] if tail_index else -1
    while i >= 0:
        chain.append(i)
        i = previous[i]
    return chain[::-1]
