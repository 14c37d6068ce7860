"""TicketAPI: a support-ticket queue, a ticket counter (the next id) and the logged-in user.

Owns: ticket_queue (list of tickets: id, title, description, status, priority, created_by[, resolution]),
ticket_counter and current_user. Creating and listing one's tickets need a login; any non-empty username and
password log in (BFCL's rule). Comparable state: all three.
"""

from __future__ import annotations

from typing import Any

from ._base import Config, Result, Simulator, error

EDITABLE_FIELDS = ("title", "description", "status", "priority")


class TicketAPI(Simulator):
    CLASS_NAME = "TicketAPI"
    DOC_FILE = "ticket_api.json"
    STATE_FIELDS = ("ticket_queue", "ticket_counter", "current_user")

    # Set by load_scenario from the entry's config, else BFCL's defaults (a ticket's fields are JSON values).
    ticket_queue: list[dict[str, Any]]
    ticket_counter: int
    current_user: str | None

    def load_scenario(self, config: Config, long_context: bool = False) -> None:
        self.long_context = long_context
        self.ticket_queue = self._take(config, "ticket_queue", [])
        self.ticket_counter = self._take(config, "ticket_counter", 1)
        self.current_user = self._take(config, "current_user", None)

    def _find(self, ticket_id: int) -> dict[str, Any] | None:
        return next((t for t in self.ticket_queue if t.get("id") == ticket_id), None)

    def create_ticket(self, title: str, description: str = "", priority: int = 1) -> Result:
        if not self.current_user:
            return error("User not authenticated. Please log in to create a ticket.")
        if not 1 <= priority <= 5:
            return error("Invalid priority. Priority must be between 1 and 5.")
        ticket = {"id": self.ticket_counter, "title": title, "description": description, "status": "Open",
                  "priority": priority, "created_by": self.current_user}
        self.ticket_queue.append(ticket)
        self.ticket_counter += 1
        return dict(ticket)

    def get_ticket(self, ticket_id: int) -> Result:
        ticket = self._find(ticket_id)
        if ticket is None:
            return error(f"Ticket with ID {ticket_id} not found.")
        return dict(ticket)

    def close_ticket(self, ticket_id: int) -> Result:
        ticket = self._find(ticket_id)
        if ticket is None:
            return error(f"Ticket with ID {ticket_id} not found.")
        if ticket.get("status") == "Closed":
            return error(f"Ticket with ID {ticket_id} is already closed.")
        ticket["status"] = "Closed"
        return {"status": f"Ticket {ticket_id} has been closed successfully."}

    def resolve_ticket(self, ticket_id: int, resolution: str) -> Result:
        ticket = self._find(ticket_id)
        if ticket is None:
            return error(f"Ticket with ID {ticket_id} not found.")
        if ticket.get("status") == "Resolved":
            return error(f"Ticket with ID {ticket_id} is already resolved.")
        ticket["status"] = "Resolved"
        ticket["resolution"] = resolution
        return {"status": f"Ticket {ticket_id} has been resolved successfully."}

    def edit_ticket(self, ticket_id: int, updates: dict[str, Any]) -> Result:
        """Only title, description, status and priority may change; a None value leaves the field as it is."""
        ticket = self._find(ticket_id)
        if ticket is None:
            return error(f"Ticket with ID {ticket_id} not found.")
        invalid = sorted(set(updates) - set(EDITABLE_FIELDS))
        if invalid:
            return error(f"Invalid fields for update: {', '.join(invalid)}")
        for key, value in updates.items():
            if value is not None:
                ticket[key] = value
        return {"status": f"Ticket {ticket_id} has been updated successfully."}

    def ticket_login(self, username: str, password: str) -> Result:
        if username and password:
            self.current_user = username
            return {"success": True}
        return {"success": False}

    def ticket_get_login_status(self) -> Result:
        return {"login_status": bool(self.current_user)}

    def logout(self) -> Result:
        if not self.current_user:
            return {"success": False}
        self.current_user = None
        return {"success": True}

    def get_user_tickets(self, status: str | None = None) -> Result:
        if not self.current_user:
            return error("User not authenticated. Please log in to view tickets.")
        mine = [t for t in self.ticket_queue if t.get("created_by") == self.current_user]
        if status and status != "None":
            mine = [t for t in mine if str(t.get("status", "")).lower() == status.lower()]
        return {"tickets": mine}
