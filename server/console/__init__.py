"""The web console: the subscriptions, their automata and plans, and the shards' counters,
served over HTTP by ``cesar serve --console-port`` behind the server's tokens (docs/console.md)."""
