"""Relations are followed only from hits whose neighbours could still make the answer
(``protocol.retrieval.gather.worth_following``), and that changes nothing a user is
shown: on a store of people, pets and varied sentences (corrections, conflicts, a
record not in use, a usage restriction, a forgotten one), every query at every limit
returns exactly the block that following every seed returns, while fewer records are
read whenever enough strong direct hits exist."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import sentences
from device import retrieval
from device.agent import DeviceAgent
from protocol.model import LifeArea
from protocol.retrieval.pipeline import retrieve
from tests.device.conftest import PASSPHRASE, MakeAgent
from tests.device.test_memory_ops import told

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)

PEOPLE = (
    "My sister Rita is a lawyer in Faro.",
    "Rita has no children but she has three dogs.",
    "Rita is afraid of flying.",
    "My dog Gaston is a scruffy griffon who is afraid of thunder.",
    "Gaston eats a grain-free kibble from the vet.",
    "I take Gaston for a long walk in the park every morning.",
    "My cat is called Pimenta and she is eleven years old.",
    "My boyfriend Duarte is a firefighter.",
    "Duarte is afraid of spiders.",
    "My brother Ben lives in Porto.",
    "Ben plays the cello in an orchestra.",
)

QUERIES = (
    "What does Rita do?",
    "What do I know about my dog?",
    "Who is afraid of something?",
    "Where does my brother live?",
    "What does my boyfriend do for a living?",
    "What should I feed Gaston?",
    "Which instrument does Ben play?",
    "What am I allergic to?",
    "How do I drink my coffee?",
    "What is the code for the garage door?",
)


def _store(agent: DeviceAgent, n: int = 150, seed: int = 4) -> None:
    rng = random.Random(seed)
    ids = [told(agent, text, f"p{i}") for i, text in enumerate(PEOPLE)]
    ids += [told(agent, sentences.sentence(rng), f"v{i}") for i in range(n)]
    told(agent, "I drink my coffee iced.", "k1")
    told(agent, "I drink my coffee hot now.", "k2")
    agent.say("Actually Ben moved to Lisbon.", "k3")
    agent.correct(ids[9], "Actually Ben moved to Lisbon.", "k3")
    agent.dont_use(ids[len(PEOPLE) + 1])
    agent.restrict_usage(ids[len(PEOPLE) + 2], area=LifeArea.WORK)
    agent.forget_permanently(ids[len(PEOPLE) + 3])


def _compare(agent: DeviceAgent, query: str, limit: int) -> tuple[int, int]:
    db = agent._db
    task = retrieval.task_for(query, NOW, limit=limit)
    pruned, hits_p = retrieval.gather(db, task)
    full, hits_f = retrieval.gather(db, task, follow_all=True)
    shown, reference = retrieve(task, pruned, hits_p), retrieve(task, full, hits_f)
    # everything but ``considered``: how many records were read, which is the point
    assert dataclasses.replace(shown, considered=0) == dataclasses.replace(
        reference, considered=0
    ), (query, limit)
    assert {c.record_id for c in pruned} <= {c.record_id for c in full}
    return len(pruned), len(full)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> object:
    agent = DeviceAgent.create(
        tmp_path_factory.mktemp("pruning"), PASSPHRASE, device_name="pruning", kdf_iterations=64
    )
    _store(agent)
    yield agent
    agent.close()


def test_pruned_relations_return_exactly_the_full_answer(store: DeviceAgent) -> None:
    read = []
    for query in QUERIES:
        for limit in (1, 3, 5, 10):
            read.append(_compare(store, query, limit))
    assert all(p <= f for p, f in read)
    assert any(p < f for p, f in read), read  # the pruning does prune somewhere


@settings(max_examples=25, deadline=None)
@given(
    words=st.lists(
        st.sampled_from(sorted({*sentences.FOODS, *sentences.PLACES, "Rita", "Gaston", "Ben"})),
        min_size=1,
        max_size=4,
    ),
    limit=st.integers(min_value=1, max_value=8),
)
def test_pruning_is_exact_for_any_query(store: DeviceAgent, words: list[str], limit: int) -> None:
    _compare(store, "What about " + " ".join(words) + "?", limit)


def test_a_fresh_agent_prunes_the_same_way(make_agent: MakeAgent) -> None:
    agent = make_agent()
    _store(agent, n=10, seed=8)
    for query in QUERIES[:4]:
        _compare(agent, query, 5)
