"""MessageAPI: a workspace's users (name -> id), the logged-in user, and the list of sent messages.

Owns: user_map, user_count, current_user, inbox (a list of {receiver_id: text}, newest last), message_count and the
message ids generated so far. Message ids come from a per-instance generator seeded as BFCL seeds it, so the same
calls give the same ids. Comparable state: all of those.
"""

from __future__ import annotations

from ._base import Config, Result, Simulator, error

DEFAULT_SEED = 200191
ID_RANGE = (10000, 99999)
"""Message ids are drawn from this range (inclusive), as BFCL draws them."""
MAX_DRAWS = 1000
"""Random draws before the smallest free id is taken instead: a golden whose generated_ids fill the range must
not loop forever (BFCL's loop would); with real data a draw never collides this often."""
DEFAULT_USERS = {"Alice": "USR001", "Bob": "USR002", "Catherine": "USR003", "Daniel": "USR004"}
DEFAULT_INBOX = [
    {"USR002": "My name is Alice. I want to connect."},
    {"USR003": "Could you upload the file?"},
    {"USR004": "Could you upload the file?"},
]


def _only_item(message: dict[str, str]) -> tuple[str, str]:
    receiver, text = next(iter(message.items()))
    return receiver, text


class MessageAPI(Simulator):
    CLASS_NAME = "MessageAPI"
    DOC_FILE = "message_api.json"
    STATE_FIELDS = ("generated_ids", "user_count", "user_map", "inbox", "message_count", "current_user")

    # Set by load_scenario from the entry's config, else BFCL's defaults.
    generated_ids: set[int]
    user_count: int
    user_map: dict[str, str]
    inbox: list[dict[str, str]]
    message_count: int
    current_user: str | None

    def load_scenario(self, config: Config, long_context: bool = False) -> None:
        self.long_context = long_context
        self._seed(config, DEFAULT_SEED)
        self.generated_ids = set(self._take(config, "generated_ids", []))
        self.user_count = self._take(config, "user_count", 4)
        self.user_map = self._take(config, "user_map", DEFAULT_USERS)
        self.inbox = self._take(config, "inbox", DEFAULT_INBOX)
        self.message_count = self._take(config, "message_count", 3)
        self.current_user = self._take(config, "current_user", None)

    def _new_id(self) -> int | None:
        """A fresh message id, drawn as BFCL draws it; None when every id of the range is taken."""
        for _ in range(MAX_DRAWS):
            new_id = self._random.randint(*ID_RANGE)
            if new_id not in self.generated_ids:
                break
        else:
            free = (i for i in range(ID_RANGE[0], ID_RANGE[1] + 1) if i not in self.generated_ids)
            found = next(free, None)
            if found is None:
                return None
            new_id = found
        self.generated_ids.add(new_id)
        return new_id

    def list_users(self) -> Result:
        return {"user_list": list(self.user_map)}

    def get_user_id(self, user: str) -> Result:
        if user not in self.user_map:
            return error(f"User '{user}' not found in the workspace.")
        return {"user_id": self.user_map[user]}

    def message_login(self, user_id: str) -> Result:
        if user_id not in self.user_map.values():
            return {"login_status": False, "message": f"User ID '{user_id}' not found."}
        self.current_user = user_id
        return {"login_status": True, "message": f"User '{user_id}' logged in successfully."}

    def message_get_login_status(self) -> Result:
        return {"login_status": bool(self.current_user)}

    def send_message(self, receiver_id: str, message: str) -> Result:
        if not self.current_user:
            return error("No user is currently logged in.")
        if receiver_id not in self.user_map.values():
            return error(f"Receiver ID '{receiver_id}' not found.")
        message_id = self._new_id()
        if message_id is None:
            return error("No message id left: every id of the workspace is taken.")
        self.inbox.append({receiver_id: message})
        self.message_count += 1
        return {"sent_status": True, "message_id": {"new_id": message_id},
                "message": f"Message sent to '{receiver_id}' successfully."}

    def delete_message(self, receiver_id: str) -> Result:
        """Deletes the latest message sent to that receiver."""
        if not self.current_user:
            return error("No user is currently logged in.")
        for index in range(len(self.inbox) - 1, -1, -1):
            if _only_item(self.inbox[index])[0] == receiver_id:
                del self.inbox[index]
                return {"deleted_status": True, "receiver_id": receiver_id,
                        "message": f"Receiver {receiver_id}'s latest message deleted successfully."}
        return error(f"Receiver ID {receiver_id} not found.")

    def view_messages_sent(self) -> Result:
        if not self.current_user:
            return error("No user is currently logged in.")
        sent: dict[str, list[str]] = {}
        for message in self.inbox:
            receiver, text = _only_item(message)
            sent.setdefault(receiver, []).append(text)
        return {"messages": sent}

    def add_contact(self, user_name: str) -> Result:
        if user_name in self.user_map:
            return error(f"User name '{user_name}' already exists.")
        user_id = f"USR{str(self.user_count + 1).zfill(3)}"
        if user_id in self.user_map.values():
            return error(f"User ID '{user_id}' already exists.")
        self.user_count += 1
        self.user_map[user_name] = user_id
        return {"added_status": True, "user_id": user_id, "message": f"Contact '{user_name}' added successfully."}

    def search_messages(self, keyword: str) -> Result:
        if not self.current_user:
            return error("No user is currently logged in.")
        needle = keyword.lower()
        return {"results": [{"receiver_id": r, "message": t} for r, t in map(_only_item, self.inbox)
                            if needle in t.lower()]}

    def get_message_stats(self) -> Result:
        if not self.current_user:
            return error("No user is currently logged in.")
        receivers = {_only_item(m)[0] for m in self.inbox}
        return {"stats": {"received_count": len(self.inbox), "total_contacts": len(receivers)}}
