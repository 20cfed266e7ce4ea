"""speclint.rules.words: the verb tables and what they infer from a tool's name and description."""

from __future__ import annotations

import pytest

from speclint.rules import words


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("sendEmail", ["send", "email"]),
        ("create-user", ["create", "user"]),
        ("slack_post_message", ["slack", "post", "message"]),
        ("git_diff", ["git", "diff"]),
    ],
)
def test_names_split_on_separators_and_camel_case(name, split):
    assert words.words(name) == split


@pytest.mark.parametrize(
    ("name", "description", "effect", "retry"),
    [
        # a read verb in the name: reads, whatever else it says
        ("get_issue", "Get details of an issue.", "reads", "safe"),
        ("read_query", "Execute a SELECT query on the database", "reads", "safe"),
        ("list_charges", "", "reads", "safe"),
        # the name's first verb decides: write_query is a write although "query" reads
        ("write_query", "Execute an INSERT, UPDATE, or DELETE query", "mutates", "unsafe"),
        # append verbs: every call adds another effect
        ("slack_post_message", "Post a new message to a Slack channel", "mutates", "unsafe"),
        ("sendEmail", "", "mutates", "unsafe"),
        ("toggle-logging", "Toggles logging on or off.", "mutates", "unsafe"),
        ("append_insight", "Add a business insight to the memo", "mutates", "unsafe"),
        # create verbs: a record is new every call, a named resource collides
        ("create_issue", "Create a new issue", "mutates", "unsafe"),
        ("add_issue_comment", "Add a comment to an existing issue", "mutates", "unsafe"),
        ("create_branch", "Create a new branch", "mutates", "safe"),
        ("create_table", "Create a new table in the database", "mutates", "safe"),
        ("create_pull_request", "Create a new pull request", "mutates", "unknown"),
        ("add_reaction", "Add a reaction emoji to a message", "mutates", "unknown"),
        # state verbs: a repeat leaves the same state
        ("update_issue", "Update an existing issue", "mutates", "safe"),
        ("user_delete", "", "mutates", "safe"),
        ("move_file", "Move or rename files and directories.", "mutates", "safe"),
        ("git_checkout", "Switches branches", "mutates", "safe"),
        # an append verb in the description outweighs a state verb in the name
        ("update_status", "Updates the status and sends a notification email.", "mutates", "unsafe"),
        # no verb in the name: the description's first verb decides
        ("weekly_report", "Returns this week's report.", "unknown", "unknown"),
        ("directory_tree", "Get a recursive tree view of files.", "reads", "safe"),
        ("outbox", "Sends the queued emails.", "mutates", "unsafe"),
        ("sequentialthinking", "A detailed tool for dynamic problem-solving.", "unknown", "unknown"),
        # the name's verb decides, not a record noun after it
        ("slack_delete_message", "Delete a message from a channel.", "mutates", "safe"),
        ("cancel_workflow_run", "Cancel a workflow run.", "mutates", "safe"),
        ("update_issue_comment", "Update a comment on an issue.", "mutates", "safe"),
        # "start" makes a new run each call; other things it starts hold a state
        ("start_build", "Start a new build for the project.", "mutates", "unsafe"),
        ("start_workflow_run", "", "mutates", "unsafe"),
        ("start_instance", "Start a stopped instance.", "mutates", "safe"),
        # each deploy rolls out again; retrying a job runs it again
        ("deploy_app", "Deploy the app to production.", "mutates", "unsafe"),
        ("retry_job", "Retry a failed job.", "mutates", "unsafe"),
        # money and tokens moved, minted or tipped: each call moves more
        ("sell_stock", "Sell shares of a stock at market price.", "mutates", "unsafe"),
        ("withdraw_funds", "Withdraws the amount to the linked bank account.", "mutates", "unsafe"),
        ("mint_nft", "Mint a new NFT to the wallet.", "mutates", "unsafe"),
        ("tip_creator", "Tip a creator in USDC.", "mutates", "unsafe"),
        ("weather", "Tip: pass a city name. Returns the forecast.", "unknown", "unknown"),
        ("start_chat", "Start a new chat session.", "mutates", "unsafe"),
        # ... but "retry" in a description is advice, not a verb of the tool
        ("report_card", "Returns the report card. Safe to retry.", "unknown", "unknown"),
        # noun-first names and OpenAPI-generated ones
        ("order_status", "Status of an order.", "reads", "safe"),
        ("schedule_get", "Returns one schedule by id.", "reads", "safe"),
        ("book_search", "Search Open Library for books.", "reads", "safe"),
        # a name ending in what is read is a noun phrase or a verb phrase: the description says
        ("deploy_logs", "Shows the build and runtime logs of a deployment.", "reads", "safe"),
        ("message_history", "The last 100 messages of a channel.", "unknown", "unknown"),
        ("push_settings", "Push the local settings to the device.", "mutates", "unsafe"),
        # running a query that only reads is reading; one that may write is not
        ("run_select_query", "Run a SELECT query in a ClickHouse cluster.", "reads", "safe"),
        ("run_snowflake_query", "Run a read-only SQL query against Snowflake.", "reads", "safe"),
        ("run_query", "Run a SELECT, INSERT or UPDATE statement.", "mutates", "unsafe"),
        ("execute_sql", "Execute any SQL statement, e.g. SELECT or DDL.", "mutates", "unsafe"),
        ("run_sql", "Run any SQL statement; SELECT queries return rows.", "mutates", "unsafe"),
        ("run_snowflake_sql", "Run a read-only SQL query against any Snowflake database.", "reads", "safe"),
        ("run_workflow", "Run a GitHub Actions workflow. Select the branch with ref.", "mutates", "unsafe"),
        (
            "execute_command",
            "Execute a shell command. The root filesystem is read-only.",
            "mutates",
            "unsafe",
        ),
        # a mutating verb before a read verb that is also a noun still mutates
        ("send_to_list", "Sends a message to every subscriber of a list.", "mutates", "unsafe"),
        ("submit_search", "Submits a search job.", "mutates", "unsafe"),
        ("create_list", "Creates a list.", "mutates", "unknown"),
        # a clause-opening "To" says what the tool is for
        ("gmail", "To send an email, provide the recipient, subject and body.", "mutates", "unsafe"),
        ("API-post-search", "Search pages by title.", "reads", "safe"),
        # a plural record noun opening the description is its subject, not a verb
        ("channel_digest", "Messages posted in a channel in the last 24 hours.", "unknown", "unknown"),
        ("owner_alert", "Emails the owner when a build breaks.", "mutates", "unsafe"),
    ],
)
def test_inference_table(name, description, effect, retry):
    inference = words.infer(name, description)

    assert (inference.effect, inference.retry) == (effect, retry), inference.evidence
    assert inference.evidence


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Sends an invoice.", ["send"]),
        ("Fetches a post, then sends it to the author.", ["send"]),
        ("Does not create a draft; it sends the post.", ["send"]),
        ("Returns the post and deletes it.", ["delete"]),
        ("Can delete files.", ["delete"]),
        # nouns: after an article, a possessive, another noun, "or"
        ("Lists the posts and pending updates of a user.", []),
        ("Demonstrates a long running operation with progress updates.", []),
        ("Shows differences between branches or commits", []),
        ("Update a branch with the latest changes from the base branch", ["update"]),
        # denials, and verbs joined to a denial
        ("It does not create or delete anything.", []),
        ("Never sends, charges, or deletes it.", []),
        ("Don't send it.", []),
        # identifiers are not words
        ("Returns the bundle_id to pass to purchase_free_bundle.", []),
        ("Call sendEmail later.", []),
        ("Use this tool to send an invoice.", ["send"]),
        # a purpose clause says what a tool is for
        ("To send an email, provide the recipient, subject and body.", ["send"]),
    ],
)
def test_verbs_count_only_in_a_verb_position_and_not_denied(text, found):
    assert words.verbs_in_text(text, words.MUTATING_VERBS) == found


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Gets a pull request. To merge it, use merge_pull_request.", []),
        ("To send an email, provide the recipient.", []),
        ("Gets a pull request and merges it.", ["merge"]),
    ],
)
def test_a_purpose_clause_never_contradicts_read_only(text, found):
    """Whether this tool or the one it points to does it, "To merge it" is not this tool merging."""
    assert words.verbs_in_text(text, words.CONTRADICTING_VERBS, purposes=False) == found


def test_verbs_of_running_something_never_contradict_read_only():
    assert "execute" in words.MUTATING_VERBS
    assert "execute" not in words.CONTRADICTING_VERBS
    assert words.verbs_in_text("Execute a SELECT query.", words.CONTRADICTING_VERBS) == []


def test_tables_do_not_overlap():
    assert not words.READ_VERBS & words.MUTATING_VERBS
    assert not words.APPEND_VERBS & words.STATE_VERBS
    assert not words.CREATE_VERBS & (words.APPEND_VERBS | words.STATE_VERBS)
    assert not words.RECORD_NOUNS & words.NAMED_NOUNS
