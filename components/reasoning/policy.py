"""A sampling policy that makes realistic slips, with the exact value of every prefix it can write.

The policy writes a solution line by line (`problems` gives the format). On a step ``a op x`` it writes the
correct result with probability 1 - eps and otherwise a digit slip (+-1 or +-10, equally likely; a slip that
would go below 0 goes up instead), where eps = ``slip_carry`` when the units column carries or borrows and
``slip_plain`` otherwise. The next step starts from the value written, so a slip propagates. A *fresh* slip
(the carried-in value was right, the written result is wrong) is noticed on the very next line with
probability ``recover``: the policy then writes ``wait a op x=<correct>`` and continues from the correct value.
Once a wrong value has been carried into a further step, it is never noticed again.

Value of a prefix. V*(prefix) = P(final answer correct | prefix, policy), computed exactly by recursion over
the policy's branches (each step: 1 correct + 4 slips; a fresh slip: recover or not). A prefix is
*recoverable* when V* > 0: it is correct so far, or it ends in a fresh slip that may still be noticed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from components.reasoning.problems import Problem, answer_line, apply, has_carry, step_line

SLIPS = (1, -1, 10, -10)
RECOVERY_PREFIX = "wait "


@dataclass(frozen=True)
class SlipPolicy:
    """Per-step slip probabilities and the chance that a fresh slip is noticed on the next line."""

    slip_carry: float = 0.25
    slip_plain: float = 0.05
    recover: float = 0.3

    def __post_init__(self) -> None:
        for name in ("slip_carry", "slip_plain", "recover"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"SlipPolicy.{name} must be in [0, 1], got {value}")

    def eps(self, a: int, op: str, x: int) -> float:
        return self.slip_carry if has_carry(a, op, x) else self.slip_plain


@dataclass(frozen=True)
class PathState:
    """A partial solution: its lines, the operations done, the value it carries, whether its last line is a
    fresh slip, per line whether the amount after it is right (PRM's step labels), and, once finished, the
    answer written."""

    lines: tuple[str, ...] = ()
    step: int = 0
    written: int | None = None
    fresh_slip: bool = False
    line_correct: tuple[bool, ...] = ()
    answer: int | None = None

    @property
    def done(self) -> bool:
        return self.answer is not None

    def text(self) -> str:
        """The solution so far, every line followed by the delimiter (a prefix ending at a step end)."""
        return "".join(line + "\n" for line in self.lines)


def start_state(problem: Problem) -> PathState:
    return PathState(written=problem.start)


def _slipped(result: int, slip: int) -> int:
    return result + slip if result + slip >= 0 else result + abs(slip)


def next_line(problem: Problem, state: PathState, policy: SlipPolicy, rng: np.random.Generator) -> PathState:
    """The state after the policy writes one more line."""
    if state.done:
        raise ValueError("the solution is already finished")
    truth = problem.running()
    if state.fresh_slip and rng.random() < policy.recover:
        op, x = problem.ops[state.step - 1]
        line = RECOVERY_PREFIX + step_line(truth[state.step - 1], op, x, truth[state.step])
        return replace(
            state,
            lines=state.lines + (line,),
            written=truth[state.step],
            fresh_slip=False,
            line_correct=state.line_correct + (True,),
        )
    if state.step == len(problem.ops):
        ok = state.written == truth[-1]
        return replace(
            state,
            lines=state.lines + (answer_line(state.written),),
            fresh_slip=False,
            line_correct=state.line_correct + (ok,),
            answer=state.written,
        )
    op, x = problem.ops[state.step]
    a = state.written
    result = apply(a, op, x)
    if rng.random() < policy.eps(a, op, x):
        result = _slipped(result, SLIPS[int(rng.integers(len(SLIPS)))])
    ok = result == truth[state.step + 1]
    fresh = not ok and a == truth[state.step]
    return replace(
        state,
        lines=state.lines + (step_line(a, op, x, result),),
        step=state.step + 1,
        written=result,
        fresh_slip=fresh,
        line_correct=state.line_correct + (ok,),
    )


def sample_solution(problem: Problem, policy: SlipPolicy, rng: np.random.Generator) -> PathState:
    """One complete solution."""
    state = start_state(problem)
    while not state.done:
        state = next_line(problem, state, policy, rng)
    return state


def prefix_value(problem: Problem, state: PathState, policy: SlipPolicy) -> float:
    """V*(state): the exact probability that the policy, continuing from ``state``, ends with the right answer."""
    if state.done:
        return float(state.answer == problem.answer)
    return _value(problem, policy, state.step, state.written, state.fresh_slip)


@functools.lru_cache(maxsize=200_000)
def _value(problem: Problem, policy: SlipPolicy, step: int, written: int, fresh: bool) -> float:
    truth = problem.running()
    if fresh:
        go_on = _continue(problem, policy, step, written)
        return policy.recover * _value(problem, policy, step, truth[step], False) + (1 - policy.recover) * go_on
    return _continue(problem, policy, step, written)


def _continue(problem: Problem, policy: SlipPolicy, step: int, written: int) -> float:
    truth = problem.running()
    if step == len(problem.ops):
        return float(written == truth[-1])
    op, x = problem.ops[step]
    result = apply(written, op, x)
    eps = policy.eps(written, op, x)
    value = (1 - eps) * _value(problem, policy, step + 1, result, False)
    carried_ok = written == truth[step]
    for slip in SLIPS:
        wrong = _slipped(result, slip)
        value += eps / len(SLIPS) * _value(problem, policy, step + 1, wrong, carried_ok and wrong != truth[step + 1])
    return value
