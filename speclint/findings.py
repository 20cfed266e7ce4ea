"""What speclint reports: the eight rules, a finding against one, severities and the exit verdict.

Every other module speaks in these records; this one imports nothing of speclint's.
"""

from __future__ import annotations

from dataclasses import dataclass

__version__ = "0.1.0"
SEVERITIES = ("info", "low", "medium", "high")
RANK = {name: rank for rank, name in enumerate(SEVERITIES)}


@dataclass(frozen=True)
class Rule:
    id: str
    slug: str
    severity: str
    title: str
    rationale: str
    fix: str


RULES = (
    Rule(
        "SL001",
        "mutating-without-idempotency-key",
        "high",
        "Mutating tool without an idempotency key",
        "Agents retry on timeouts and errors; without a key to deduplicate on, every retry repeats "
        "the tool's effects (a second email, a second charge).",
        "Add an optional, bounded string property such as idempotency_key that the server "
        "deduplicates on, and tell callers to reuse it on retries; or mark the tool "
        "readOnlyHint/idempotentHint if repeating a call really changes nothing.",
    ),
    Rule(
        "SL002",
        "annotations-missing-or-contradicting",
        "medium",
        "Annotations missing or contradicting the schema",
        "Clients decide whether to confirm, retry or auto-run a tool from its annotations; missing "
        "hints default to the worst case and wrong hints mislead them.",
        "Declare readOnlyHint, destructiveHint, idempotentHint and openWorldHint truthfully: not "
        "read-only if the tool changes anything, idempotent only if every call is.",
    ),
    Rule(
        "SL003",
        "unbounded-input",
        "medium",
        "Unbounded input",
        "Inputs without length, item or property limits mean unbounded cost per call and unlimited "
        "room for prompt injection.",
        "Give every string a maxLength (or an enum/const), every array a maxItems, and every object "
        "additionalProperties: false.",
    ),
    Rule(
        "SL004",
        "local-model-incompatible-schema",
        "high",
        "Schema that local-model engines reject or weaken",
        "Local runtimes compile the input schema into a grammar with llguidance, outlines-core or "
        "llama.cpp's converter; what one rejects cannot be called from that runtime, and what one "
        "weakens lets the model send values the schema forbids.",
        "Rewrite the construct the finding names: no if/then/else, not, uniqueItems, contains or "
        "propertyNames; anchored patterns with explicit classes ([0-9], not \\d) and no "
        "lookarounds or backreferences; a pattern that bounds the length instead of "
        "minLength/maxLength beside it. $schema, local $ref/$defs and common formats are fine.",
    ),
    Rule(
        "SL005",
        "undisclosed-side-effects",
        "low",
        "Undisclosed side effects",
        "An agent, and the human approving its call, should learn from the description what a "
        "call changes, and be able to validate what it returns.",
        "Say in the description what the tool changes (sends, creates, updates, deletes, charges, "
        "...) and publish an outputSchema for its structured results.",
    ),
    Rule(
        "SL006",
        "invalid-or-unsatisfiable-schema",
        "high",
        "Schema that clients cannot use or no call can satisfy",
        "A pattern one side cannot compile, an unknown type, bounds that exclude every value or a "
        "required property that may not be given break every call; a parameter without a type "
        "leaves callers guessing.",
        "Use ECMA-262 patterns that Python also compiles, JSON Schema types, bounds that leave "
        "values, and a type on every parameter.",
    ),
    Rule(
        "SL007",
        "unconstrained-sensitive-string",
        "medium",
        "Path, URL or command parameter without constraints",
        "A string that names a file, a URL or a command reaches the filesystem, the network or an "
        "interpreter: unconstrained, a hostile or confused caller reaches anything the server can.",
        "Constrain it with an anchored pattern or an enum and enforce the same on the server.",
    ),
    Rule(
        "SL008",
        "instructions-to-the-model",
        "high",
        "Description that instructs the model",
        "Descriptions reach the model verbatim and the person approving a call rarely reads them: "
        "text that tells the model to read secrets, keep things from the user, ignore its other "
        "instructions or change how another tool is used turns the tool list into an attack "
        "(tool poisoning), and hidden characters keep it out of sight.",
        "Describe the tool and its parameters for a reader; remove instructions to the model and "
        "invisible characters.",
    ),
)

RULE_BY_ID = {rule.id: rule for rule in RULES}


@dataclass(frozen=True)
class Finding:
    rule_id: str
    tool: str
    path: str
    message: str
    fix: str
    level: str | None = None  # this finding's severity when it differs from the rule's

    @property
    def rule(self) -> Rule:
        return RULE_BY_ID[self.rule_id]

    @property
    def severity(self) -> str:
        return self.level or self.rule.severity

    def as_dict(self) -> dict:
        return {
            "rule_id": self.rule_id,
            "rule": self.rule.slug,
            "severity": self.severity,
            "tool": self.tool,
            "path": self.path,
            "message": self.message,
            "fix": self.fix,
        }


def fails(findings: list[Finding], fail_on: str) -> bool:
    if fail_on == "never":
        return False
    return any(RANK[f.severity] >= RANK[fail_on] for f in findings)
