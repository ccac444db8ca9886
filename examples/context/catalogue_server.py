"""A business-operations MCP server with a catalogue of 351 tools (stdio, newline-delimited JSON-RPC,
Python 3 standard library only), for examples/context/catalogue_bytes.cpp.

    python3 catalogue_server.py DATA.json

Thirteen domains of three resources each, nine verbs per resource: 351 tools. Every definition is
built from the same templates (a verb's parameters, a resource's fields), so the three tools the
example's task needs (support_list_tickets, crm_get_customer, billing_list_invoices) have schemas
like the other 348 and are not cheaper to read. Only those three answer, from DATA.json; a call of
any other tool is a tool error.

Sizing: a definition as the model is shown it (compact JSON of name, description and input schema,
the way the example counts it) is 521 bytes on average here, 292 to 1,110. The npm reference
servers measured the same way average 570 bytes (filesystem, 14 tools) and 380 bytes (everything,
13 tools), and their definitions also carry titles, annotations and output schemas that are not
counted. So a tool here weighs what a tool of the realistic case weighs; the catalogue is not padded.

tools/list is paged (100 tools a page, nextCursor), as large servers page.
"""
import json
import sys

PAGE = 100


# Field kinds: a JSON-schema fragment per kind, so the templates stay readable.
def kind_schema(kind, description):
    if isinstance(kind, list):
        return {"type": "string", "enum": kind, "description": description}
    if kind == "date":
        return {"type": "string", "format": "date", "description": description}
    if kind == "money":
        return {"type": "object", "description": description,
                "properties": {"amount_cents": {"type": "integer"},
                               "currency": {"type": "string", "pattern": "^[A-Z]{3}$"}},
                "required": ["amount_cents", "currency"]}
    if kind == "address":
        return {"type": "object", "description": description,
                "properties": {k: {"type": "string"} for k in ("line1", "city", "postal_code", "country")}}
    if kind == "tags":
        return {"type": "array", "items": {"type": "string"}, "maxItems": 20, "description": description}
    if kind.startswith("ref:"):
        return {"type": "string", "pattern": "^%s-[0-9]+$" % kind[4:7], "description": description}
    return {"type": kind, "description": description}


# domain -> (what the domain is, {resource: (plural, statuses, {field: (kind, description)})})
DOMAINS = {
    "crm": ("the CRM", {
        "customer": ("customers", ["lead", "active", "churned"], {
            "name": ("string", "Display name"), "region": (["eu", "na", "apac", "latam"], "Sales region"),
            "tier": (["free", "team", "enterprise"], "Commercial tier"),
            "account_manager_id": ("ref:employee", "Owning account manager"),
            "billing_address": ("address", "Where invoices go")}),
        "contact": ("contacts", ["active", "bounced", "unsubscribed"], {
            "email": ("string", "Primary email"), "customer_id": ("ref:customer", "Employer"),
            "role": ("string", "Job title")}),
        "deal": ("deals", ["open", "won", "lost"], {
            "customer_id": ("ref:customer", "Buyer"), "value": ("money", "Expected contract value"),
            "stage": (["qualify", "propose", "negotiate", "close"], "Pipeline stage"),
            "close_date": ("date", "Expected close")}),
    }),
    "billing": ("the billing ledger", {
        "invoice": ("invoices", ["draft", "open", "paid", "overdue", "void"], {
            "customer_id": ("ref:customer", "Billed customer"), "due_on": ("date", "Payment due date"),
            "amount_due": ("money", "Outstanding amount"), "currency": (["EUR", "USD", "GBP"], "Invoice currency")}),
        "subscription": ("subscriptions", ["trialing", "active", "past_due", "canceled"], {
            "customer_id": ("ref:customer", "Subscriber"), "plan": (["team", "business", "enterprise"], "Plan"),
            "seats": ("integer", "Licensed seats"), "renews_on": ("date", "Next renewal")}),
        "payment": ("payments", ["pending", "succeeded", "failed", "refunded"], {
            "invoice_id": ("ref:invoice", "Settled invoice"), "amount": ("money", "Amount received"),
            "method": (["card", "sepa", "wire"], "Payment method")}),
    }),
    "support": ("the support desk", {
        "ticket": ("tickets", ["new", "open", "pending", "solved", "closed"], {
            "customer_id": ("ref:customer", "Requesting customer"),
            "priority": (["low", "normal", "high", "urgent"], "Priority"),
            "assignee_id": ("ref:employee", "Assigned agent"),
            "channel": (["email", "chat", "phone"], "Where it came in"), "tags": ("tags", "Free-form labels")}),
        "macro": ("macros", ["active", "inactive"], {
            "title": ("string", "Macro title"), "actions": ("tags", "Actions applied, in order")}),
        "sla_policy": ("sla_policies", ["active", "inactive"], {
            "first_reply_minutes": ("integer", "First reply target"),
            "priority": (["low", "normal", "high", "urgent"], "Applies to")}),
    }),
    "inventory": ("the stock ledger", {
        "item": ("items", ["active", "discontinued"], {
            "sku": ("string", "Stock keeping unit"), "unit_cost": ("money", "Landed cost"),
            "reorder_point": ("integer", "Reorder below")}),
        "warehouse": ("warehouses", ["open", "closed"], {
            "code": ("string", "Short code"), "address": ("address", "Site address")}),
        "stock_adjustment": ("stock_adjustments", ["pending", "applied", "rejected"], {
            "item_id": ("ref:item", "Adjusted item"), "warehouse_id": ("ref:warehouse", "Where"),
            "delta": ("integer", "Units added (negative: removed)"),
            "reason": (["count", "damage", "theft", "return"], "Why")}),
    }),
    "orders": ("the order book", {
        "order": ("orders", ["pending", "paid", "fulfilled", "canceled"], {
            "customer_id": ("ref:customer", "Buyer"), "total": ("money", "Order total"),
            "ship_to": ("address", "Delivery address")}),
        "return": ("returns", ["requested", "received", "refunded", "rejected"], {
            "order_id": ("ref:order", "Original order"),
            "reason": (["damaged", "wrong_item", "unwanted"], "Return reason")}),
        "quote": ("quotes", ["draft", "sent", "accepted", "expired"], {
            "customer_id": ("ref:customer", "Prospect"), "valid_until": ("date", "Expiry"),
            "total": ("money", "Quoted total")}),
    }),
    "shipping": ("the shipping desk", {
        "shipment": ("shipments", ["label_created", "in_transit", "delivered", "exception"], {
            "order_id": ("ref:order", "Shipped order"), "carrier_id": ("ref:carrier", "Carrier"),
            "tracking_number": ("string", "Tracking")}),
        "carrier": ("carriers", ["enabled", "disabled"], {
            "name": ("string", "Carrier name"), "services": ("tags", "Service levels offered")}),
        "label": ("labels", ["created", "printed", "voided"], {
            "shipment_id": ("ref:shipment", "Labelled shipment"), "format": (["pdf", "zpl", "png"], "Label format")}),
    }),
    "hr": ("the HR system", {
        "employee": ("employees", ["active", "on_leave", "terminated"], {
            "name": ("string", "Full name"), "email": ("string", "Work email"),
            "manager_id": ("ref:employee", "Line manager"),
            "department": (["sales", "support", "finance", "engineering"], "Department")}),
        "time_off_request": ("time_off_requests", ["requested", "approved", "declined"], {
            "employee_id": ("ref:employee", "Requester"), "starts_on": ("date", "First day"),
            "ends_on": ("date", "Last day")}),
        "position": ("positions", ["open", "filled", "closed"], {
            "title": ("string", "Job title"),
            "department": (["sales", "support", "finance", "engineering"], "Department")}),
    }),
    "marketing": ("the marketing suite", {
        "campaign": ("campaigns", ["draft", "scheduled", "sent", "archived"], {
            "segment_id": ("ref:segment", "Audience"), "template_id": ("ref:email_template", "Content"),
            "send_at": ("date", "Send date")}),
        "segment": ("segments", ["active", "archived"], {
            "name": ("string", "Segment name"), "rules": ("tags", "Membership rules")}),
        "email_template": ("email_templates", ["draft", "published"], {
            "subject": ("string", "Subject line"), "locale": (["en", "de", "fr", "es"], "Language")}),
    }),
    "projects": ("the project tracker", {
        "project": ("projects", ["planned", "active", "done", "canceled"], {
            "name": ("string", "Project name"), "owner_id": ("ref:employee", "Owner"),
            "due_on": ("date", "Target date")}),
        "task": ("tasks", ["todo", "doing", "done"], {
            "project_id": ("ref:project", "Project"), "assignee_id": ("ref:employee", "Assignee"),
            "estimate_hours": ("number", "Estimate"), "labels": ("tags", "Labels")}),
        "milestone": ("milestones", ["open", "reached", "missed"], {
            "project_id": ("ref:project", "Project"), "due_on": ("date", "Due")}),
    }),
    "docs": ("the document store", {
        "document": ("documents", ["draft", "published", "archived"], {
            "title": ("string", "Title"), "folder_id": ("ref:folder", "Folder"),
            "owner_id": ("ref:employee", "Owner")}),
        "folder": ("folders", ["active", "archived"], {
            "name": ("string", "Folder name"), "parent_id": ("ref:folder", "Parent folder")}),
        "comment": ("comments", ["open", "resolved"], {
            "document_id": ("ref:document", "Commented document"), "body": ("string", "Comment text")}),
    }),
    "calendar": ("the shared calendar", {
        "event": ("events", ["confirmed", "tentative", "canceled"], {
            "title": ("string", "Title"), "starts_on": ("date", "Day"), "attendees": ("tags", "Attendee emails")}),
        "room": ("rooms", ["available", "maintenance"], {
            "name": ("string", "Room name"), "capacity": ("integer", "Seats")}),
        "booking": ("bookings", ["held", "confirmed", "released"], {
            "room_id": ("ref:room", "Room"), "event_id": ("ref:event", "Event")}),
    }),
    "analytics": ("the analytics warehouse", {
        "report": ("reports", ["queued", "ready", "failed"], {
            "metric": (["revenue", "churn", "nps", "tickets"], "Measured metric"), "period_start": ("date", "From"),
            "period_end": ("date", "To")}),
        "dashboard": ("dashboards", ["shared", "private"], {
            "name": ("string", "Dashboard name"), "widgets": ("tags", "Widget ids")}),
        "metric_alert": ("metric_alerts", ["armed", "firing", "muted"], {
            "metric": (["revenue", "churn", "nps", "tickets"], "Watched metric"),
            "threshold": ("number", "Fires above")}),
    }),
    "security": ("the security console", {
        "api_key": ("api_keys", ["active", "revoked"], {
            "owner_id": ("ref:employee", "Owner"), "scopes": ("tags", "Granted scopes"),
            "expires_on": ("date", "Expiry")}),
        "role": ("roles", ["active", "deprecated"], {
            "name": ("string", "Role name"), "permissions": ("tags", "Permissions")}),
        "audit_event": ("audit_events", ["recorded"], {
            "actor_id": ("ref:employee", "Who"), "action": ("string", "What was done")}),
    }),
}

VERBS = ("list", "get", "create", "update", "delete", "search", "archive", "restore", "export")


def tool_definition(domain, about, resource, plural, statuses, fields):
    """The nine tools of one resource: (name, description, inputSchema) each."""
    noun, nouns, key = resource.replace("_", " "), plural.replace("_", " "), "%s_id" % resource
    rid = {"type": "string", "pattern": "^%s-[0-9]+$" % resource[:3], "description": "The %s's id" % noun}
    status = {"type": "string", "enum": statuses, "description": "Only %s in this state" % nouns}
    props = {name: kind_schema(kind, text) for name, (kind, text) in fields.items()}
    filters = {name: schema for name, schema in props.items() if schema.get("type") != "object"}
    page = {"page_size": {"type": "integer", "minimum": 1, "maximum": 100, "default": 25,
                          "description": "Results per page"},
            "cursor": {"type": "string", "description": "next_cursor of the previous page"}}
    sort = {"type": "string", "enum": ["created_at", "-created_at", "updated_at", "-updated_at"]}

    def obj(properties, required=()):
        return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}

    tools = {
        "list": ("Lists %s in %s, newest first. Paged: pass next_cursor back as cursor. Filters combine with AND."
                 % (nouns, about),
                 obj({"status": status, **filters, **page, "sort": sort})),
        "get": ("Returns one %s with every field, by id. Fails with not_found for an id that does not exist or is "
                "archived." % noun,
                obj({key: rid, "expand": {"type": "array", "items": {"type": "string", "enum": sorted(props)[:3]},
                                          "description": "Related records to inline"}}, [key])),
        "create": ("Creates a %s. Send an idempotency_key to make retries safe; the same key within 24 h returns the "
                   "first result." % noun,
                   obj({**props, "idempotency_key": {"type": "string", "maxLength": 64}}, sorted(props)[:1])),
        "update": ("Changes the given fields of a %s; absent fields are left alone. if_match guards against lost "
                   "updates." % noun,
                   obj({key: rid, "changes": obj(props),
                        "if_match": {"type": "string", "description": "ETag from get"}}, [key, "changes"])),
        "delete": ("Deletes a %s permanently. Prefer archive: a deleted %s cannot be restored." % (noun, noun),
                   obj({key: rid, "confirm": {"type": "boolean", "const": True}}, [key, "confirm"])),
        "search": ("Full-text search over %s; returns ids and highlighted snippets, best match first." % nouns,
                   obj({"query": {"type": "string", "minLength": 2}, "status": status,
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10}}, ["query"])),
        "archive": ("Archives a %s: hidden from list and search, kept for audit, restorable for 90 days." % noun,
                    obj({key: rid, "reason": {"type": "string", "maxLength": 500}}, [key])),
        "restore": ("Restores an archived %s to the state it had when archived." % noun,
                    obj({key: rid}, [key])),
        "export": ("Exports %s matching the filters to a file and returns a download link valid for one hour." % nouns,
                   obj({"format": {"type": "string", "enum": ["csv", "jsonl", "xlsx"]}, "status": status,
                        "columns": {"type": "array", "items": {"type": "string", "enum": sorted(props)}}},
                       ["format"])),
    }
    for verb in VERBS:
        description, schema = tools[verb]
        target = plural if verb in ("list", "search", "export") else resource
        yield "%s_%s_%s" % (domain, verb, target), description, schema


CATALOGUE = [
    {"name": name, "description": description, "inputSchema": schema}
    for domain, (about, resources) in DOMAINS.items()
    for resource, (plural, statuses, fields) in resources.items()
    for name, description, schema in tool_definition(domain, about, resource, plural, statuses, fields)
]
assert len(CATALOGUE) == 351 and len({t["name"] for t in CATALOGUE}) == 351


def answer(data, name, args):
    """The text of a call's result, or None for a tool this example does not implement."""
    if name == "support_list_tickets":
        keep = [t for t in data["tickets"]
                if all(t.get(k) == args[k] for k in ("status", "priority", "customer_id", "channel") if k in args)]
        size = args.get("page_size", 25)
        start = int(args.get("cursor", "0"))
        window = keep[start:start + size]
        more = start + size < len(keep)
        return {"tickets": window, "total": len(keep), "next_cursor": str(start + size) if more else None}
    if name == "crm_get_customer":
        found = [c for c in data["customers"] if c["id"] == args.get("customer_id")]
        if not found:
            raise LookupError("not_found: no customer %s" % args.get("customer_id"))
        return found[0]
    if name == "billing_list_invoices":
        keep = [i for i in data["invoices"]
                if all(i.get(k) == args[k] for k in ("status", "customer_id") if k in args)]
        return {"invoices": keep[:args.get("page_size", 25)], "total": len(keep), "next_cursor": None}
    return None


def main():
    with open(sys.argv[1]) as f:
        data = json.load(f)
    def send(message):
        sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
        sys.stdout.flush()
    for line in sys.stdin:
        message = json.loads(line)
        method, id, params = message.get("method"), message.get("id"), message.get("params") or {}
        if id is None:
            continue  # notifications
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                                         "serverInfo": {"name": "catalogue", "version": "1"}}})
        elif method == "tools/list":
            start = int(params.get("cursor") or 0)
            result = {"tools": CATALOGUE[start:start + PAGE]}
            if start + PAGE < len(CATALOGUE):
                result["nextCursor"] = str(start + PAGE)
            send({"jsonrpc": "2.0", "id": id, "result": result})
        elif method == "tools/call":
            name, args = params.get("name"), params.get("arguments") or {}
            try:
                value = answer(data, name, args)
            except LookupError as e:
                value, text = None, str(e)
            else:
                text = "%s is not implemented by this example server" % name
            failed = value is None
            if not failed:
                text = json.dumps(value, separators=(",", ":"))
            send({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}],
                                                         "isError": failed}})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": id, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found: %s" % method}})


if __name__ == "__main__":
    main()
