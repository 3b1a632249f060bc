"""The shard processes: one engine per lane, applying whole epochs sent by the front."""
