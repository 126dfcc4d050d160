"""memoryport inside agent frameworks: each module is one framework, behind its own extra.

- :mod:`memoryport.integrations.langgraph`: a LangGraph ``BaseStore`` over any
  :class:`~memoryport.GuardedMemory` (extra ``langgraph``).
- :mod:`memoryport.integrations.pydantic_ai`: the memory tools as a pydantic-ai
  toolset (extra ``pydantic-ai``).
- :mod:`memoryport.integrations.openai_agents`: the memory tools as OpenAI Agents
  SDK function tools (extra ``openai-agents``).
- :mod:`memoryport.integrations.langchain`: the memory tools as LangChain
  ``BaseTool``\\ s (extra ``langchain``).

Every integration is a composition over the public API (:func:`~memoryport.memory_tools`,
:class:`~memoryport.GuardedMemory`): the scope always comes from the host's
context in that framework's own idiom (run dependencies, run context, runnable
config, namespace template), never from the model's arguments. Importing this
package imports no framework; importing one of its modules without the extra
raises :class:`~memoryport.MissingExtra` with the install line.
"""
