"""TwitterAPI (posting): one account (username/password, login flag), tweets by id, comments, retweets, follows.

Owns: username, password, authenticated, tweets (id -> tweet), comments (tweet id -> list), retweets (username ->
tweet ids), following_list and tweet_counter (the next tweet id). Writing needs a login (authenticate_twitter), as
the docs say; reading does not. Comparable state: all of those.
"""

from __future__ import annotations

from typing import Any

from ._base import Config, Result, Simulator, error

DEFAULTS = {
    "username": "john", "password": "john123", "authenticated": False, "tweets": {}, "comments": {},
    "retweets": {}, "following_list": ["alice", "bob"], "tweet_counter": 0,
}


def _int_keys(d: dict[int | str, Any]) -> dict[int | str, Any]:
    """JSON config keys are strings; tweet ids are integers in calls, so they are keyed by int (as BFCL does)."""
    return {int(k) if isinstance(k, str) and k.lstrip("-").isdigit() else k: v for k, v in d.items()}


class TwitterAPI(Simulator):
    CLASS_NAME = "TwitterAPI"
    DOC_FILE = "posting_api.json"
    STATE_FIELDS = tuple(DEFAULTS)

    # Set by load_scenario from the entry's config, else DEFAULTS (a tweet's or comment's fields are JSON values).
    username: str
    password: str
    authenticated: bool
    tweets: dict[int | str, dict[str, Any]]
    comments: dict[int | str, list[dict[str, Any]]]
    retweets: dict[str, list[int]]
    following_list: list[str]
    tweet_counter: int

    def load_scenario(self, config: Config, long_context: bool = False) -> None:
        self.long_context = long_context
        for key, default in DEFAULTS.items():
            setattr(self, key, self._take(config, key, default))
        self.tweets = _int_keys(self.tweets)
        self.comments = _int_keys(self.comments)

    def _need_login(self, action: str) -> Result | None:
        if not self.authenticated:
            return error(f"User not authenticated. Please authenticate before {action}.")
        return None

    def authenticate_twitter(self, username: str, password: str) -> Result:
        if username == self.username and password == self.password:
            self.authenticated = True
            return {"authentication_status": True}
        return {"authentication_status": False}

    def posting_get_login_status(self) -> Result:
        return {"login_status": bool(self.authenticated)}

    def post_tweet(self, content: str, tags: list[str] | None = None, mentions: list[str] | None = None) -> Result:
        if (denied := self._need_login("posting")) is not None:
            return denied
        tweet = {"id": self.tweet_counter, "username": self.username, "content": content,
                 "tags": list(tags or []), "mentions": list(mentions or [])}
        self.tweets[self.tweet_counter] = tweet
        self.tweet_counter += 1
        return dict(tweet)

    def retweet(self, tweet_id: int) -> Result:
        if (denied := self._need_login("retweeting")) is not None:
            return denied
        if tweet_id not in self.tweets:
            return error(f"Tweet with ID {tweet_id} not found.")
        mine = self.retweets.setdefault(self.username, [])
        if tweet_id in mine:
            return {"retweet_status": "Already retweeted"}
        mine.append(tweet_id)
        return {"retweet_status": "Successfully retweeted"}

    def comment(self, tweet_id: int, comment_content: str) -> Result:
        if (denied := self._need_login("commenting")) is not None:
            return denied
        if tweet_id not in self.tweets:
            return error(f"Tweet with ID {tweet_id} not found.")
        self.comments.setdefault(tweet_id, []).append({"username": self.username, "content": comment_content})
        return {"comment_status": "Comment added successfully"}

    def mention(self, tweet_id: int, mentioned_usernames: list[str]) -> Result:
        if tweet_id not in self.tweets:
            return error(f"Tweet with ID {tweet_id} not found.")
        self.tweets[tweet_id].setdefault("mentions", []).extend(mentioned_usernames)
        return {"mention_status": "Users mentioned successfully"}

    def follow_user(self, username_to_follow: str) -> Result:
        if (denied := self._need_login("following")) is not None:
            return denied
        if username_to_follow in self.following_list:
            return {"follow_status": False}
        self.following_list.append(username_to_follow)
        return {"follow_status": True}

    def list_all_following(self) -> Result:
        if (denied := self._need_login("listing following")) is not None:
            return denied
        return {"following_list": list(self.following_list)}

    def unfollow_user(self, username_to_unfollow: str) -> Result:
        if (denied := self._need_login("unfollowing")) is not None:
            return denied
        if username_to_unfollow not in self.following_list:
            return {"unfollow_status": False}
        self.following_list.remove(username_to_unfollow)
        return {"unfollow_status": True}

    def get_tweet(self, tweet_id: int) -> Result:
        if tweet_id not in self.tweets:
            return error(f"Tweet with ID {tweet_id} not found.")
        return dict(self.tweets[tweet_id])

    def get_user_tweets(self, username: str) -> Result:
        return {"user_tweets": [t for t in self.tweets.values() if t.get("username") == username]}

    def search_tweets(self, keyword: str) -> Result:
        """Case-insensitive: the keyword in the content, or equal to one of the tags."""
        needle = keyword.lower()
        return {"matching_tweets": [
            t for t in self.tweets.values()
            if needle in str(t.get("content", "")).lower() or needle in [str(x).lower() for x in t.get("tags", [])]
        ]}

    def get_tweet_comments(self, tweet_id: int) -> Result:
        if tweet_id not in self.tweets:
            return error(f"Tweet with ID {tweet_id} not found.")
        return {"comments": list(self.comments.get(tweet_id, []))}

    def get_user_stats(self, username: str) -> Result:
        return {
            "tweet_count": sum(1 for t in self.tweets.values() if t.get("username") == username),
            "following_count": len(self.following_list) if username == self.username else 0,
            "retweet_count": len(self.retweets.get(username, [])),
        }
