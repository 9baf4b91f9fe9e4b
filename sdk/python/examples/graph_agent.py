"""An agent built as a small state graph, the way LangGraph programs are: nodes that each
take the state and return an update, and edges that pick the next node. Roundtable is only
its input and output: a mention comes in, the graph runs, its answer goes back to the room.
Swap `answer` for a call to your model and the graph for a LangGraph `StateGraph`.

    ROUNDTABLE_HUB=ws://127.0.0.1:7300/v1/ws ROUNDTABLE_AGENT_TOKEN=rt_… python graph_agent.py
"""

import asyncio
import os
import re
from typing import Callable

from roundtable import Client

State = dict[str, object]
Node = Callable[[State], State]


class Graph:
    """Nodes and conditional edges; runs from `start` until a node routes to `END`."""

    END = "end"

    def __init__(self, start: str):
        self.start = start
        self.nodes: dict[str, Node] = {}
        self.edges: dict[str, Callable[[State], str]] = {}

    def node(self, name: str, run: Node, then: Callable[[State], str]) -> None:
        self.nodes[name] = run
        self.edges[name] = then

    def invoke(self, state: State) -> State:
        current = self.start
        while current != Graph.END:
            state = {**state, **self.nodes[current](state)}
            current = self.edges[current](state)
        return state


def understand(state: State) -> State:
    question = str(state["text"])
    sums = re.fullmatch(r".*?(-?\d+)\s*\+\s*(-?\d+).*", question)
    return {"intent": "sum" if sums else "other", "terms": sums.groups() if sums else ()}


def add(state: State) -> State:
    left, right = (int(term) for term in state["terms"])  # type: ignore[union-attr]
    return {"answer": f"{left} + {right} = {left + right}"}


def answer(state: State) -> State:
    return {"answer": f"I can add numbers; you said: {state['text']}"}


def build() -> Graph:
    graph = Graph("understand")
    graph.node("understand", understand, lambda s: "add" if s["intent"] == "sum" else "answer")
    graph.node("add", add, lambda s: Graph.END)
    graph.node("answer", answer, lambda s: Graph.END)
    return graph


async def main() -> None:
    graph = build()
    hub = os.environ.get("ROUNDTABLE_HUB", "ws://127.0.0.1:7300/v1/ws")
    token = os.environ["ROUNDTABLE_AGENT_TOKEN"]
    cursors = os.environ.get("ROUNDTABLE_CURSORS", "graph-agent-cursors.json")
    async with Client(hub, token, cursors=cursors) as agent:
        print(f"ready {agent.principal.handle}", flush=True)
        async for message in agent.messages():
            state = graph.invoke({"text": message.text})
            await agent.send(message.stream, str(state["answer"]), client_key=f"reply-{message.id}")


if __name__ == "__main__":
    asyncio.run(main())
