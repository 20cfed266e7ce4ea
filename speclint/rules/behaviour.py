"""The rules about what a tool does and says it does: SL001 (an idempotency key on a mutating
tool), SL002 (annotations present and true to the tool's words) and SL005 (side effects disclosed).

A tool mutates when its annotations say so, or, without annotations, when its words do
(``speclint.rules.words``).
"""

from __future__ import annotations

import re

from speclint.findings import Finding
from speclint.rules import words
from speclint.schema.walk import root_schema, text

# Root input-schema property names that count as an idempotency key (compared case-insensitively).
IDEMPOTENCY_KEY_NAMES = (
    "idempotency_key",
    "idempotencyKey",
    "idempotency-key",
    "request_id",
    "requestId",
    "client_request_id",
    "dedupe_key",
    "dedup_key",
)
_KEY_NAMES = frozenset(name.casefold() for name in IDEMPOTENCY_KEY_NAMES)

# SL005: words that say what a call changes in the world (any one is enough).
SIDE_EFFECT_WORDS = (
    "side effect",
    "side effects",
    "side-effect",
    "side-effects",
    "send", "sends", "sent",
    "create", "creates", "created",
    "update", "updates", "updated",
    "delete", "deletes", "deleted",
    "remove", "removes", "removed",
    "write", "writes", "written",
    "charge", "charges", "charged",
    "pay", "pays", "paid",
    "buy", "buys", "bought",
    "purchase", "purchases", "purchased",
    "email", "emails", "emailed",
    "store", "stores", "stored",
    "save", "saves", "saved",
    "change", "changes", "changed",
    "modify", "modifies", "modified",
    "post", "posts", "posted",
    "publish", "publishes", "published",
    "insert", "inserts", "inserted",
    "upload", "uploads", "uploaded",
    "transfer", "transfers", "transferred",
    "cancel", "cancels", "cancelled", "canceled",
    "notify", "notifies", "notified",
    "overwrite", "overwrites", "overwritten",
    "add", "adds", "added",
    "append", "appends", "appended",
    "push", "pushes", "pushed",
    "move", "moves", "moved",
    "rename", "renames", "renamed",
    "switch", "switches", "switched",
    "merge", "merges", "merged",
    "fork", "forks", "forked",
    "commit", "commits", "committed",
    "reset", "resets",
    "stage", "stages", "staged", "unstage", "unstages", "unstaged",
    "edit", "edits", "edited",
    "replace", "replaces", "replaced",
    "toggle", "toggles", "toggled",
    "reply", "replies", "replied",
    "execute", "executes", "executed",
    "set", "sets",
    "register", "registers", "registered",
    "archive", "archives", "archived",
    "close", "closes", "closed",
    "enable", "enables", "enabled", "disable", "disables", "disabled",
)  # fmt: skip
HINT_KEYS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_SIDE_EFFECT_RE = re.compile(
    r"\b(?:" + "|".join(re.escape(w) for w in SIDE_EFFECT_WORDS) + r")\b", re.IGNORECASE
)


def annotations_of(tool: dict) -> dict:
    hints = tool.get("annotations")
    return hints if isinstance(hints, dict) else {}


def idempotency_keys(tool: dict) -> list[str]:
    """The root input properties whose names mark them as idempotency keys."""
    properties = root_schema(tool).get("properties")
    if not isinstance(properties, dict):
        return []
    return [name for name in properties if isinstance(name, str) and name.casefold() in _KEY_NAMES]


def declares_behaviour(tool: dict) -> bool:
    """Whether the tool's annotations set any of the four behaviour hints."""
    return any(key in annotations_of(tool) for key in HINT_KEYS)


def mutation(tool: dict) -> tuple[str, words.Inference]:
    """How the tool is known to mutate: ("declared" | "inferred" | "", inference from its words).

    Declared: annotations set a hint and readOnlyHint is not true. Inferred: no hints, and the
    name (or else the description) uses a mutating verb. "" when it is read-only or unknown."""
    inference = words.infer(text(tool, "name"), text(tool, "description"))
    if declares_behaviour(tool):
        if annotations_of(tool).get("readOnlyHint") is True:
            return "", inference
        retry, evidence = words.retry_of(text(tool, "name"), text(tool, "description"))
        return "declared", words.Inference("mutates", retry, evidence)
    return ("inferred" if inference.effect == "mutates" else ""), inference


def check_idempotency_key(tool: dict, name: str) -> list[Finding]:
    """SL001: a declared or inferred mutating tool, not retry-safe, that takes no idempotency key.

    High when its words say every call adds another effect (post, send, create_issue, ...);
    medium when they say nothing either way; nothing when they say a repeat is harmless
    (update, delete, create_branch, ...) or it declares idempotentHint: true."""
    how, inference = mutation(tool)
    if not how or annotations_of(tool).get("idempotentHint") is True or idempotency_keys(tool):
        return []
    if inference.retry == "safe":
        return []
    has_properties = isinstance(root_schema(tool).get("properties"), dict)
    path = "/inputSchema/properties" if has_properties else "/inputSchema"
    what = "declared neither read-only nor idempotent" if how == "declared" else "no annotations"
    if inference.retry == "unsafe":
        level = "high"
        why = f"{what}, and {inference.evidence} says each call adds another effect"
    else:
        level = "medium"
        why = f"{what}; it mutates ({inference.evidence}) and nothing says a repeat is harmless"
    return [
        Finding(
            "SL001",
            name,
            path,
            f"{why}; with no idempotency key (idempotency_key, request_id, ...) a retrying agent "
            "repeats the effect",
            'add an optional string property "idempotency_key" (maxLength 128, anchored pattern) '
            "that the server deduplicates on, and tell callers to reuse it when they retry; or "
            "declare idempotentHint: true if a repeat really changes nothing",
            level,
        )
    ]


def check_annotations(tool: dict, name: str) -> list[Finding]:
    """SL002: annotations missing, or contradicting what the name, description or schema say."""
    found = []
    raw = tool.get("annotations")
    if not isinstance(raw, dict):
        found.append(
            Finding(
                "SL002",
                name,
                "/annotations",
                "the tool has no annotations: clients must assume it is destructive, "
                "non-idempotent and open-world",
                "add annotations with readOnlyHint, destructiveHint, idempotentHint and "
                "openWorldHint set to what the tool really does",
            )
        )
    elif not any(key in raw for key in HINT_KEYS):
        found.append(
            Finding(
                "SL002",
                name,
                "/annotations",
                "annotations set none of readOnlyHint, destructiveHint, idempotentHint, openWorldHint",
                "set the four behaviour hints to what the tool really does",
            )
        )
    hints = annotations_of(tool)
    if hints.get("readOnlyHint") is True:
        verb = words.name_verb(words.words(text(tool, "name")))
        where = "name"
        if verb not in words.CONTRADICTING_VERBS:
            said = words.verbs_in_text(text(tool, "description"), words.CONTRADICTING_VERBS, purposes=False)
            verb, where = (said[0], "description") if said else (None, "")
        if verb is not None:
            found.append(
                Finding(
                    "SL002",
                    name,
                    "/annotations/readOnlyHint",
                    f"readOnlyHint is true but the tool's {where} says it changes something ({verb!r})",
                    "set readOnlyHint to false (and add an idempotency key), or reword the "
                    f"{where} if the tool really only reads",
                )
            )
    if hints.get("idempotentHint") is True:
        required = root_schema(tool).get("required")
        required = required if isinstance(required, list) else []
        optional = [key for key in idempotency_keys(tool) if key not in required]
        if optional:
            found.append(
                Finding(
                    "SL002",
                    name,
                    "/annotations/idempotentHint",
                    f"idempotentHint is true but the idempotency key {optional[0]!r} is optional: "
                    "a call without it is not idempotent, so the hint overstates",
                    f"add {optional[0]!r} to inputSchema.required, or set idempotentHint to false",
                )
            )
    return found


def check_side_effects(tool: dict, name: str) -> list[Finding]:
    """SL005: a mutating tool that does not say what it changes; a tool without outputSchema."""
    found = []
    if mutation(tool)[0]:
        description = tool.get("description")
        if not isinstance(description, str) or not _SIDE_EFFECT_RE.search(description):
            found.append(
                Finding(
                    "SL005",
                    name,
                    "/description",
                    "the tool may change things (not readOnlyHint) but its description does not "
                    "say what it changes",
                    "state the side effects in the description (e.g. 'Side effects: sends one "
                    "email and creates a contact'), or mark it readOnlyHint if it changes nothing",
                )
            )
    if not isinstance(tool.get("outputSchema"), dict):
        found.append(
            Finding(
                "SL005",
                name,
                "/outputSchema",
                "the tool has no outputSchema: clients cannot validate its structured results",
                "publish an outputSchema describing structuredContent",
            )
        )
    return found
