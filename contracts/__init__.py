"""The memoryport contract suite (an opt-in pytest plugin). Under construction."""
