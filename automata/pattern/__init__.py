"""The pattern language of the SASE and SASE+ papers: syntax, meaning, and its compilation."""
