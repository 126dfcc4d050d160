"""Backends for memoryport, importable as ``memoryport.adapters.*``.

Each module holds one backend. The SDK adapters import their SDK lazily and
raise :class:`~memoryport.MissingExtra` with the install line when it is absent.
"""
