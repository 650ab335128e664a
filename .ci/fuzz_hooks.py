"""schemathesis hooks for .ci/fuzz: every valid `Idempotency-Key` the
fuzzer sends is made unique.

The fuzzer draws short keys ("0", "A") and sends the same one with
unrelated POSTs. A key replays its first answer for a day, so a POST
identical to an earlier one gets that earlier answer back, naming a
resource created (and perhaps deleted) long before, which the stateful
checks take for a resource that vanished. A client must not reuse a key
for another request: here each request gets its own. Negative cases are
sent as drawn: changing one would make schemathesis revalidate it as a
positive case and send what it meant to leave out.
"""

import re
import uuid

import schemathesis

VALID_KEY = re.compile(r"^[!-~]{1,255}$")


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    if case.meta is not None and case.meta.generation.mode.is_negative:
        return
    headers = case.headers or {}
    for name, key in list(headers.items()):
        if name.lower() == "idempotency-key" and isinstance(key, str) and VALID_KEY.match(key):
            headers[name] = f"{key[:222]}-{uuid.uuid4().hex}"
