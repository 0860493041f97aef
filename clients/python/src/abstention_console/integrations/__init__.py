"""Framework integrations, each an optional extra so the client itself needs only httpx:

- `abstention_console.integrations.langchain.ConsoleCallbackHandler` (`pip install
  "abstention-console-client[langchain]"`), a LangChain callback handler;
- `abstention_console.integrations.llamaindex.ConsoleEventHandler` (`[llamaindex]`), a LlamaIndex
  instrumentation event handler.

Each records one decision per top-level run of a retrieval-augmented chain: its question, the
retrieved passages with scores and ranks, the answer and the gate decision. Import the module of
the framework you use; this package imports neither.
"""
