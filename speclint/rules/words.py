"""What a tool does, read from its name and description: speclint's verb tables and inference.

Two questions of every tool: does it change anything (reads, mutates or unknown), and if it does,
is a repeated call harmless (retry safe), does every call add another effect (unsafe), or neither
(unknown)? Declared annotations answer the first when a server sets them; the words answer the
rest. Words are whole words, case-insensitive; names split on ``_``, ``-``, spaces and camelCase;
in a description a verb counts only in a verb position, and not under a negation. The table of
what each kind of verb infers is docs/speclint.md, "One finding per root cause: what a tool does".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

READ_VERBS = frozenset(
    {
        "get", "list", "read", "search", "find", "fetch", "query", "lookup", "describe", "show",
        "view", "count", "check", "validate", "preview", "estimate", "retrieve", "inspect", "browse",
        "download", "export", "diff", "status", "explain", "lint", "verify", "summarize", "compare",
        "convert", "calculate", "compute", "echo", "ping",
    }
)  # fmt: skip
# Each call adds another effect: a second message, row, charge, commit; or flips a state back.
APPEND_VERBS = frozenset(
    {
        "send", "post", "reply", "comment", "append", "push", "publish", "submit", "notify", "email",
        "message", "invite", "tweet", "insert", "execute", "run", "trigger", "launch", "schedule",
        "enqueue", "book", "charge", "pay", "buy", "purchase", "order", "transfer", "refund",
        "increment", "decrement", "toggle", "edit", "upload", "broadcast", "dispatch", "forward",
        "deploy", "redeploy", "retry", "rerun", "resend", "replay", "sell", "withdraw", "deposit",
        "swap", "mint", "tip", "donate", "stake", "requeue",
    }
)  # fmt: skip
# A repeat leaves the state the first call set, or is refused because it already holds.
STATE_VERBS = frozenset(
    {
        "update", "set", "put", "replace", "overwrite", "upsert", "save", "write", "rename", "move",
        "delete", "remove", "clear", "reset", "close", "reopen", "archive", "unarchive", "enable",
        "disable", "lock", "unlock", "checkout", "switch", "merge", "mkdir", "ensure", "stage",
        "unstage", "mark", "assign", "unassign", "star", "unstar", "follow", "unfollow", "pin",
        "unpin", "subscribe", "unsubscribe", "approve", "cancel", "revoke", "grant", "install",
        "uninstall", "start", "stop", "restart", "fork", "commit", "apply", "sync",
    }
)  # fmt: skip
# Whether these repeat depends on what they make: see RECORD_NOUNS and NAMED_NOUNS.
CREATE_VERBS = frozenset({"create", "add", "new", "make", "generate", "register", "record"})
# Things every create call adds anew (a repeat makes a second one).
RECORD_NOUNS = frozenset(
    {
        "issue", "comment", "review", "message", "reply", "post", "note", "insight", "entry",
        "record", "row", "rows", "event", "task", "job", "ticket", "order", "payment", "invoice",
        "transaction", "email", "thought", "log", "memo", "incident", "alert", "notification",
        "reminder", "booking", "reservation", "charge", "transfer", "commit", "version", "draft",
    }
)  # fmt: skip
# Things known by a name the caller picks: a repeat collides with the first (or finds it).
NAMED_NOUNS = frozenset(
    {
        "branch", "repository", "repo", "directory", "folder", "table", "database", "bucket",
        "container", "index", "label", "tag", "namespace", "topic", "queue", "schema", "view",
    }
)  # fmt: skip
# What "start" makes anew each call (start_build, start_workflow_run); other things it starts hold
# a state a repeat leaves alone (start_server, start_instance).
RUN_NOUNS = frozenset(
    {"build", "run", "job", "workflow", "pipeline", "task", "scan", "crawl", "test", "session",
     "backup", "migration", "deployment", "export", "import", "conversation", "thread", "execution",
     "chat"}
)  # fmt: skip
MUTATING_VERBS = APPEND_VERBS | STATE_VERBS | CREATE_VERBS
# Verbs that name a thing as often as an action, and so may open a resource-first name
# (schedule_get, run_list, book_search).
NOUN_LIKE_VERBS = frozenset(
    {"run", "schedule", "book", "replay", "transfer", "edit", "trigger", "deploy", "dispatch", "push",
     "charge", "order", "message", "comment", "email", "post", "import"}
)  # fmt: skip
# Read verbs that end such a name (write_query writes one: a query is a thing too).
ACTION_LAST = frozenset(
    {"get", "list", "read", "search", "find", "fetch", "describe", "show", "view", "retrieve",
     "inspect", "browse", "lookup"}
)  # fmt: skip
# Nouns of what a read returns: a name ending in one is a noun phrase as often as a verb phrase.
READ_HEADS = frozenset(
    {"status", "logs", "history", "info", "details", "metadata", "limits", "stats", "statistics",
     "analytics", "usage", "metrics", "settings", "subscriptions", "results", "summary"}
)  # fmt: skip
# Verbs of running something: a read-only tool may well say it runs a query or triggers a
# notification, so they never contradict readOnlyHint (they still count as mutating otherwise).
PROCESS_VERBS = frozenset(
    {"run", "execute", "trigger", "launch", "start", "stop", "restart", "schedule", "sync", "apply",
     "generate", "record", "register", "notify", "dispatch", "retry", "rerun", "replay"}
)  # fmt: skip
CONTRADICTING_VERBS = MUTATING_VERBS - PROCESS_VERBS

# Verbs counted only in a name (retry_job, tip_creator): a description says "safe to retry" of
# reads too, and opens a hint with "Tip:".
NAME_ONLY_VERBS = frozenset({"retry", "rerun", "replay", "tip"})

NEGATIONS = frozenset({"not", "never", "without", "doesn't", "don't", "won't", "cannot", "can't", "no"})
# A verb form right after one of these words is in a verb position.
VERB_POSITION_AFTER = frozenset(
    {
        "to", "will", "would", "can", "could", "may", "might", "must", "shall", "should", "also",
        "then", "and", "it", "that", "which", "who", "tool", "server", "function", "endpoint",
        "automatically", "immediately", "permanently", "directly", "first", "finally", "optionally",
        "always", "just", "only", "actually", "instantly", "atomically", "safely",
    }
)  # fmt: skip

# Identifiers (purchase_free_bundle, getItem, v2) are tokens too, so their parts are never verbs.
_WORD_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_']*")
# A comma is not a break: "branches, commits and tags" lists nouns far more often than verbs.
_OBJECT_FOLLOWS = re.compile(
    r"\s+(?:the|a|an|each|every|all|your|their|its|this|that|these|those|one|any)\b", re.IGNORECASE
)
_CLAUSE_BREAKS = ".!?;:\n(-*•"


def words(name: str) -> list[str]:
    """`sendEmail`, `send_email`, `send-email` -> ["send", "email"]."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [word.lower() for word in re.split(r"[^A-Za-z0-9]+", spaced) if word]


def base_form(word: str) -> str:
    """The verb a word may be a form of: "sends" -> "send", "pushes" -> "push", "copies" -> "copy"."""
    for known in (READ_VERBS, MUTATING_VERBS):
        if word in known:
            return word
    if word.endswith("ies") and word[:-3] + "y" in MUTATING_VERBS | READ_VERBS:
        return word[:-3] + "y"
    if word.endswith("es") and word[:-2] in MUTATING_VERBS | READ_VERBS:
        return word[:-2]
    if word.endswith("s") and word[:-1] in MUTATING_VERBS | READ_VERBS:
        return word[:-1]
    return word


def verbs_in_text(text: str, vocabulary: frozenset[str], purposes: bool = True) -> list[str]:
    """The verbs of `vocabulary` that `text` uses in a verb position and does not deny, in order.

    A clause-opening "To" names a purpose: "To send an email, provide ..." says what this tool is
    for, "To merge it, use merge_pull_request" what another one is for. With `purposes` false
    (the readOnlyHint check) such verbs are left out."""
    found: list[str] = []
    denied_chain = False  # the previous verb was denied, and this one is joined to it ("or", ",")
    previous_end = 0
    prior_word = ""  # the token before this one, lower-cased ("" at the start)
    purpose = False  # the prior token is a "To" opening a clause: "To merge it, use merge_pull_request"
    # One pass, looking back only to the previous token: descriptions come from the server, and
    # re-scanning the text before every word made a 500 KB description take 16 s.
    for match in _WORD_RE.finditer(text):
        token = match.group(0)
        word = token.lower() if token.isalpha() or "'" in token and token.replace("'", "").isalpha() else ""
        verb = base_form(word)
        between = text[previous_end : match.start()]
        gap = between.rstrip()
        clause_start = gap[-1] in _CLAUSE_BREAKS if gap else previous_end == 0
        joined = denied_chain and re.fullmatch(r"[\s,]*(?:(?:or|and|nor)\s+)?", between, re.IGNORECASE)
        # "Messages posted in a channel": a plural record noun opening a sentence is its subject,
        # unless an object follows it ("Emails the owner").
        plural_noun = clause_start and word != verb and verb in RECORD_NOUNS
        if plural_noun and not _OBJECT_FOLLOWS.match(text, match.end()):
            verb = ""
        if verb in vocabulary and verb not in NAME_ONLY_VERBS:
            if prior_word in NEGATIONS or joined:
                denied_chain = True
            elif purpose and not purposes:
                denied_chain = False
            elif purpose or clause_start or prior_word in VERB_POSITION_AFTER:
                found.append(verb)
                denied_chain = False
            else:
                denied_chain = False
        elif word not in NEGATIONS and word not in {"or", "and", "nor", "does", "do", "will", "is"}:
            denied_chain = False
        previous_end = match.end()
        purpose = clause_start and word == "to"
        prior_word = token.lower()
    return found


@dataclass(frozen=True)
class Inference:
    """What speclint reads from a tool's words (see the module's table)."""

    effect: str  # "reads" | "mutates" | "unknown"
    retry: str  # "safe" | "unsafe" | "unknown"
    evidence: str  # the words that decided, and where ("'post' in the name")


def name_verb(name_words: list[str]) -> str | None:
    """The name's verb: its first word that is a known verb (`slack_post_message` -> "post"), or
    None when the name has none or is a noun phrase (then the description decides).

    Some names put a noun first. OpenAPI-generated ones spell the HTTP method (`API-post-search`),
    and "post" says nothing there; a record noun before a read verb is its object
    (`order_status`, `message_search`), and so is a verb that is as often a noun when a read verb
    ends the name (`schedule_get`, `book_search`: resource, then action; `send_to_list` and
    `submit_search` still send and submit). A name ending in a noun of what is read (`run_status`,
    `deploy_logs`, `transfer_limits`) is a verb and its object as often as a noun phrase, so it
    is left to the description."""
    if len(name_words) > 2 and name_words[0] in ("api", "http") and name_words[1] == "post":
        name_words = name_words[2:]
    verbs = [w for w in name_words if w in READ_VERBS or w in MUTATING_VERBS]
    if not verbs:
        return None
    if verbs[0] in RECORD_NOUNS or (verbs[0] in NOUN_LIKE_VERBS and name_words[-1] in ACTION_LAST):
        read = next((w for w in verbs[1:] if w in READ_VERBS), None)
        if read is not None:
            return read
    if len(name_words) > 1 and name_words[-1] in READ_HEADS and verbs[0] not in READ_VERBS:
        return None
    return verbs[0]


def retry_of(name: str, description: str) -> tuple[str, str]:
    """Whether repeating a mutating call is harmless: ("safe" | "unsafe" | "unknown", evidence)."""
    # The name's verb decides, not any word of it: slack_delete_message deletes a message.
    name_words = words(name)
    verb = name_verb(name_words)
    if verb in APPEND_VERBS:
        return "unsafe", f"{verb!r} in the name"
    if verb in CREATE_VERBS:
        nouns = [w for w in _nouns(name_words[name_words.index(verb) + 1 :]) if w in RECORD_NOUNS]
        if nouns:  # the last one is the head: add_issue_comment adds a comment
            return "unsafe", f"{verb!r} a new {nouns[-1]!r} in the name"
    if verb == "start":
        runs = [w for w in _nouns(name_words[name_words.index(verb) + 1 :]) if w in RUN_NOUNS]
        if runs:  # start_build starts another build each call
            return "unsafe", f"'start' a new {runs[-1]!r} in the name"
    appended = verbs_in_text(description, APPEND_VERBS)
    if appended:
        return "unsafe", f"{appended[0]!r} in the description"
    where = "name"
    if verb is None or verb in READ_VERBS:
        mutating = verbs_in_text(description, MUTATING_VERBS)
        verb, where = (mutating[0], "description") if mutating else (None, "")
    if verb in STATE_VERBS:
        return "safe", f"{verb!r} in the {where}"
    if verb in CREATE_VERBS and where == "name":
        index = name_words.index(verb)
        noun = next((w for w in _nouns(name_words[index + 1 :]) if w in NAMED_NOUNS), None)
        if noun is not None:
            return "safe", f"{verb!r} a named {noun!r} in the name"
    if verb is None:
        return "unknown", "no mutating verb in the name or description"
    return "unknown", f"{verb!r} in the {where} says nothing about repeats"


# SELECT or read-only said of the query itself ("a SELECT query", "read-only SQL statements").
_READ_ONLY_QUERY = re.compile(
    r"\b(?:select|read[\s-]?only)\s+(?:sql\s+)?(?:quer(?:y|ies)|statements?|sql)\b", re.IGNORECASE
)
_WRITE_SQL = re.compile(
    r"\b(?:insert|update|delete|drop|create|alter|truncate|merge|upsert|grant|write|writes|modify"
    r"|ddl|dml|any\s+(?:sql\s+)?(?:statements?|commands?))\b",
    re.IGNORECASE,
)


def _read_only_query(name: str, description: str) -> bool:
    """Whether a tool that runs a query says the query only reads (run_select_query, "Run a
    read-only SQL query") and names nothing that writes ("SELECT or DDL", "any statement")."""
    said = " ".join(words(name)) + " " + description
    return bool(_READ_ONLY_QUERY.search(said)) and not _WRITE_SQL.search(said)


def _nouns(name_words: list[str]) -> list[str]:
    """Words and their singulars ("entities" -> "entity", "files" -> "file")."""
    out = []
    for w in name_words:
        out.append(w)
        if w.endswith("ies"):
            out.append(w[:-3] + "y")
        elif w.endswith("s"):
            out.append(w[:-1])
    return out


def infer(name: str, description: str) -> Inference:
    """Whether a tool reads or mutates, and whether a repeat is harmless, from its words alone."""
    verb = name_verb(words(name))
    where = "name"
    if verb is None:
        first = verbs_in_text(description, READ_VERBS | MUTATING_VERBS)
        verb, where = (first[0], "description") if first else (None, "")
    if verb is None:
        return Inference("unknown", "unknown", "no known verb in the name or description")
    if verb in READ_VERBS:
        return Inference("reads", "safe", f"{verb!r} in the {where}")
    if verb in ("run", "execute") and _read_only_query(name, description):
        return Inference("reads", "safe", f"{verb!r} a read-only query")
    retry, evidence = retry_of(name, description)
    return Inference("mutates", retry, evidence)
