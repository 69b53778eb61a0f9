"""The token level: vocabularies, their byte trie, composition into a `TokenDFA`, and its artifact."""
