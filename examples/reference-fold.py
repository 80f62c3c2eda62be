#!/usr/bin/env python3
"""A reference fold of Relay's email streams, written from docs/event-status-rules.md alone.

Reads events as JSON lines (what `relay events --prefix email-` or `relay events export --format
jsonl` prints: {id, streamId, revision, type, data, ...}) on standard input, in global order,
and prints one JSON line per email with what GET /v1/emails/{id} shows of its statuses:

    {"id", "status", "recipients": [{"address", "status", "occurredAt"}], "sentAt",
     "deliveredAt", "failureCode"}

Only the Python standard library; Python 3.8 or later.
"""
import json
import sys

RANK = {
    "queued": 0, "simulated": 0, "processing": 1, "sent": 2, "delayed": 3, "delivered": 4,
    "soft_bounced": 5, "failed": 5, "rejected": 6, "hard_bounced": 6, "suppressed": 7, "complained": 8,
}
FINAL = {"sent", "delivered", "failed", "rejected", "hard_bounced", "soft_bounced", "complained", "suppressed"}


def reported_over(current, reported):
    """A report moves a recipient only up, but always past "failed" (only the sender writes it)."""
    if current == "failed" or RANK[reported] > RANK[current]:
        return reported
    return current


def sender_how(recipient):
    """The sender's outcomes replace a status, unless a report recorded first had followed them."""
    return "reported_first" if recipient.get("reportedFirst") else "replace"


class Email:
    def __init__(self, data, status):
        self.id = data["emailId"]
        # Recipient index order: To, then CC. BCC recipients come after and are never shown.
        self.recipients = [
            {"address": a, "status": status, "occurredAt": data["occurredAt"]}
            for a in data["toAddresses"] + data["ccAddresses"]
        ]
        self.sent_at = None
        self.delivered_at = None
        self.failure_code = None
        self.revision = -1
        # Recipients Relay is done sending to: they once had a final status (a later reported
        # delay shows, but a claim leaves them as they are).
        self.done = set()

    def visible(self, index):
        return 0 <= index < len(self.recipients)

    def set_status(self, index, status, at, how):
        """how: "replace" (the sender's outcome), "report", or "reported_first" (the sender's
        outcome that a report recorded before it had followed)."""
        recipient = self.recipients[index]
        current = recipient["status"]
        if how == "report":
            new = reported_over(current, status)
        elif how == "reported_first":
            new = reported_over(status, current)
        else:
            new = status
        if new != current:
            recipient["status"] = new
            recipient["occurredAt"] = at
        # Done once an outcome was final, even when the report recorded first still shows.
        if new in FINAL or status in FINAL:
            self.done.add(index)

    def outcomes(self, triples, at):
        """triples: (index, status, how) of one event; sets statuses and sentAt/deliveredAt."""
        shown = [(i, s, how) for i, s, how in triples if self.visible(i)]
        for index, status, how in shown:
            self.set_status(index, status, at, how)
        statuses = {s for _, s, _ in shown}
        if self.sent_at is None and statuses & {"sent", "delivered"}:
            self.sent_at = at
        if self.delivered_at is None and "delivered" in statuses:
            self.delivered_at = at

    def status(self):
        best = "queued"
        for r in self.recipients:
            if RANK[r["status"]] > RANK[best]:
                best = r["status"]
        return best

    def view(self):
        return {
            "id": self.id,
            "status": self.status(),
            "recipients": self.recipients,
            "sentAt": self.sent_at,
            "deliveredAt": self.delivered_at,
            "failureCode": self.failure_code,
        }


def apply(emails, event):
    kind, data = event["type"], event["data"]
    email_id = event["streamId"][len("email-"):]
    email = emails.get(email_id)
    if email is not None and event["revision"] <= email.revision:
        return  # delivered twice: applied already
    if kind in ("EmailAccepted", "EmailSuppressed"):
        email = emails[email_id] = Email(data, "queued" if kind == "EmailAccepted" else "suppressed")
    elif email is None:
        return  # no admission to place it on
    elif kind == "DeliveryClaimed":
        pending = [(i, "processing", "replace") for i, r in enumerate(email.recipients) if r["status"] not in FINAL and i not in email.done]
        email.outcomes(pending, data["occurredAt"])
    elif kind == "DeliveryAttempted":
        triples = [(r["index"], r["status"], sender_how(r)) for r in data["recipients"]]
        email.outcomes(triples, data["occurredAt"])
        if email.failure_code is None:
            # Each recipient's own code (events from before it was kept: the attempt's); the
            # first visible recipient's that failed or was rejected, never a BCC one's.
            codes = [r.get("failureCode") or data["failureCode"] for r in data["recipients"]
                     if email.visible(r["index"]) and r["status"] in ("failed", "rejected")]
            email.failure_code = next((c for c in codes if c), None)
    elif kind == "DeliveryFailed":
        triples = [(r["index"], "failed", sender_how(r)) for r in data["recipients"]]
        email.outcomes(triples, data["occurredAt"])
        if email.failure_code is None and any(r["address"] is not None for r in data["recipients"]):
            email.failure_code = data["failureCode"]
    elif kind == "RecipientReported":
        if data["outcome"] != "undetermined" and data["address"] is not None:
            email.outcomes([(data["recipientIndex"], data["outcome"], "report")], data["occurredAt"])
    # Any other type was written by a newer Relay: skipped, never guessed at.
    email.revision = event["revision"]


def main():
    emails = {}
    for line in sys.stdin:
        line = line.strip()
        if line:
            event = json.loads(line)
            if event["streamId"].startswith("email-"):
                apply(emails, event)
    for email in emails.values():
        print(json.dumps(email.view()))


if __name__ == "__main__":
    main()
