from memoryport import CallableMemory, MemoryRecord, MemoryScope


def test_callable_round_trip() -> None:
    rows: dict[str, MemoryRecord] = {}

    def add(records: list[MemoryRecord]) -> None:
        rows.update({r.id: r for r in records if r.id})

    def search(query: str, scope: MemoryScope, k: int, filters: object) -> list[MemoryRecord]:
        return [r for r in rows.values() if scope.covers(r.scope) and query in r.text][:k]

    memory = CallableMemory(add=add, search=search)
    ann, ben = MemoryScope(user_id="ann"), MemoryScope(user_id="ben")
    memory.add_sync([MemoryRecord(scope=ann, text="Ann likes tea")])
    assert [h.record.text for h in memory.search_sync("tea", scope=ann)] == ["Ann likes tea"]
    assert memory.search_sync("tea", scope=ben) == []
