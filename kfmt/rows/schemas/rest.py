"""Schemas from a schema registry's REST API (Confluent Schema Registry, Karapace, Redpanda, Apicurio's
Confluent-compatible API): read-only lookups, each answer cached for the life of the process.

* `GET /schemas/ids/{id}` -> `{"schema", "schemaType"?, "references"?}` (soft-deleted versions
  included, as the registry answers);
* `GET /subjects/{subject}/versions?deleted=true` -> `[1, 2, ...]`, then
  `GET /subjects/{subject}/versions/{v}?deleted=true` -> `{"id", "schema", ...}` per version.

Authentication as the registry clients take it: HTTP basic (`user:password`, Confluent's
`basic.auth.user.info`) or a bearer token, and extra headers. A 404 is an answer (no such id or
subject); anything else that fails -- refused connection, 5xx, a reply that is not JSON -- is one
runtime error naming the URL: decoding without the registry would only fill the dead-letter output.
"""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request

from kfmt.errors import KfmtError
from kfmt.rows.schemas.registered import AVRO, RegisteredSchema, SchemaReference, Schemas

TIMEOUT_S = 30.0


class RestLookup:
    """Picklable: tasks on other processes make their own requests (and keep their own cache)."""

    def __init__(self, url: str, basic_auth: str | None = None, bearer: str | None = None,
                 headers: dict | None = None):
        self.url = url.rstrip("/")
        self.headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json",
                        **(headers or {})}
        if basic_auth:
            self.headers["Authorization"] = "Basic " + base64.b64encode(basic_auth.encode()).decode()
        if bearer:
            self.headers["Authorization"] = f"Bearer {bearer}"
        self._cache: dict = {}

    def __getstate__(self):
        return {**self.__dict__, "_cache": {}}

    def _get(self, path: str):
        if path in self._cache:
            return self._cache[path]
        request = urllib.request.Request(self.url + path, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as reply:
                answer = json.loads(reply.read())
        except urllib.error.HTTPError as err:
            if err.code != 404:
                raise KfmtError(f"schema registry {self.url}{path}: HTTP {err.code} {err.reason}") from None
            answer = None
        except (urllib.error.URLError, OSError, ValueError) as err:
            reason = getattr(err, "reason", err)
            raise KfmtError(f"schema registry {self.url}{path}: {reason}") from None
        self._cache[path] = answer
        return answer

    def schema(self, schema_id: int) -> RegisteredSchema | None:
        answer = self._get(f"/schemas/ids/{schema_id}")
        return None if answer is None else registered(schema_id, answer)

    def subject(self, subject: str) -> dict:
        name = urllib.parse.quote(subject, safe="")
        versions = self._get(f"/subjects/{name}/versions?deleted=true") or []
        out = {}
        for version in versions:
            answer = self._get(f"/subjects/{name}/versions/{version}?deleted=true")
            if answer is not None:
                out[int(version)] = (int(answer["id"]), bool(answer.get("deleted", False)))
        return out


def registered(schema_id: int, answer: dict) -> RegisteredSchema:
    refs = tuple(SchemaReference(r["name"], r["subject"], int(r["version"]))
                 for r in answer.get("references") or ())
    return RegisteredSchema(schema_id, answer.get("schemaType") or AVRO, answer["schema"], refs)


def schemas_from_registry(url: str, basic_auth: str | None = None, bearer: str | None = None,
                          headers: dict | None = None) -> Schemas:
    return Schemas(f"the schema registry {url}", lookup=RestLookup(url, basic_auth, bearer, headers))
