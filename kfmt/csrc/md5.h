/* MD5 (RFC 1321) of one whole message: the key hash of the compaction offset map (Kafka's
 * SkimpyOffsetMap keys its table by the MD5 of each record key; kfmt/format/offset_map.py,
 * whose reference is hashlib.md5). */
#ifndef KFMT_MD5_H
#define KFMT_MD5_H
#include <stddef.h>
#include <stdint.h>

void kfmt_md5(const void *data, size_t len, uint8_t digest[16]);

#endif
