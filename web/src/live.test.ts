import { describe, expect, it } from 'vitest'
import { finished, initialLive, liveReducer, maxLiveOutput, parseData, summarize, type LiveAction, type LiveState } from './live'
import { formatDuration } from './format'
import type { Run, TraceEvent, TraceType } from './types'

function ev(seq: number, type: TraceType, data: Record<string, unknown> = {}): TraceEvent {
  return { seq, at: `2025-01-01T00:00:0${seq}Z`, type, data, hash: `h${seq}`, prev_hash: seq > 1 ? `h${seq - 1}` : '' }
}

function run(over: Partial<Run>): Run {
  return {
    id: 'run_1',
    agent_id: 'agt_1',
    status: 'running',
    triggered_by: null,
    parent_run_id: null,
    root_run_id: 'run_1',
    depth: 0,
    message_id: 'msg_1',
    driver: 'builtin',
    change_set_id: null,
    tokens: { input: 0, output: 0 },
    violation: null,
    reason: '',
    created_at: '',
    started_at: null,
    ended_at: null,
    ...over,
  }
}

function reduce(actions: LiveAction[], start: LiveState = initialLive('run_1')): LiveState {
  return actions.reduce(liveReducer, start)
}

describe('liveReducer', () => {
  it('follows a run from admitted to completed', () => {
    const steps: [LiveAction, string, boolean][] = [
      [{ type: 'trace', event: ev(1, 'admitted') }, 'admitted', false],
      [{ type: 'trace', event: ev(2, 'started', { model: 'scripted' }) }, 'running', false],
      [{ type: 'trace', event: ev(3, 'tool_call', { name: 'shell', arguments: '{"command":"ls"}' }) }, 'running', false],
      [{ type: 'trace', event: ev(4, 'tool_result', { name: 'shell', output: 'looked\n', exit_code: 0 }) }, 'running', false],
      [{ type: 'trace', event: ev(5, 'ended', { status: 'completed', reason: 'done', change_set_id: 'chg_1' }) }, 'completed', true],
    ]
    let s = initialLive('run_1')
    for (const [action, status, ended] of steps) {
      s = liveReducer(s, action)
      expect(s.status).toBe(status)
      expect(s.ended).toBe(ended)
    }
    expect(s.events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5])
    expect(s.reason).toBe('done')
    expect(s.changeSetId).toBe('chg_1')
    expect(finished(s)).toBe(true)
  })

  it('streams deltas until the whole message arrives', () => {
    let s = reduce([
      { type: 'trace', event: ev(1, 'started') },
      { type: 'delta', content: 'I wrote ' },
      { type: 'delta', content: 'hello.txt.' },
    ])
    expect(s.streaming).toBe('I wrote hello.txt.')
    s = liveReducer(s, { type: 'trace', event: ev(2, 'message', { content: 'I wrote hello.txt.' }) })
    expect(s.streaming).toBe('')
  })

  it('shows a tool\'s output as it comes, until its result arrives', () => {
    let s = reduce([
      { type: 'trace', event: ev(1, 'started') },
      { type: 'trace', event: ev(2, 'tool_call', { id: 'c1', name: 'shell' }) },
      { type: 'output', toolCallId: 'c1', content: 'first\n' },
      { type: 'output', toolCallId: 'c1', content: 'second\n' },
    ])
    expect(s.toolOutput).toBe('first\nsecond\n')
    // A result for another call leaves it; this call's result replaces it.
    s = liveReducer(s, { type: 'trace', event: ev(3, 'tool_result', { id: 'c0' }) })
    expect(s.toolOutput).toBe('first\nsecond\n')
    s = liveReducer(s, { type: 'trace', event: ev(4, 'tool_result', { id: 'c1', output: 'first\nsecond\n' }) })
    expect(s.toolOutput).toBe('')
    // The next call starts afresh.
    s = reduce([{ type: 'output', toolCallId: 'c1', content: 'old' }, { type: 'output', toolCallId: 'c2', content: 'new' }], s)
    expect(s.toolOutput).toBe('new')
    // Long output keeps its newest part.
    s = liveReducer(s, { type: 'output', toolCallId: 'c2', content: 'x'.repeat(maxLiveOutput) })
    expect(s.toolOutput.length).toBe(maxLiveOutput)
    expect(s.toolOutput.endsWith('x')).toBe(true)
    // The end clears it, and output after the end is ignored.
    s = liveReducer(s, { type: 'trace', event: ev(5, 'ended', { status: 'killed' }) })
    expect(s.toolOutput).toBe('')
    s = liveReducer(s, { type: 'output', toolCallId: 'c2', content: 'late' })
    expect(s.toolOutput).toBe('')
  })

  it('takes a running tool\'s output afresh from a stream opened again from the start', () => {
    let s = reduce([
      { type: 'trace', event: ev(1, 'tool_call', { id: 'c1', name: 'shell' }) },
      { type: 'output', toolCallId: 'c1', content: 'first\n' },
    ])
    // The new stream replays the trace and sends the output so far again.
    s = reduce([
      { type: 'reopened' },
      { type: 'trace', event: ev(1, 'tool_call', { id: 'c1', name: 'shell' }) },
      { type: 'output', toolCallId: 'c1', content: 'first\nsecond\n' },
    ], s)
    expect(s.toolOutput).toBe('first\nsecond\n')
  })

  it('ignores events a reconnect replays', () => {
    const s = reduce([
      { type: 'trace', event: ev(1, 'admitted') },
      { type: 'trace', event: ev(2, 'started') },
      { type: 'trace', event: ev(1, 'admitted') },
      { type: 'trace', event: ev(2, 'started') },
    ])
    expect(s.events.map((e) => e.seq)).toEqual([1, 2])
    expect(s.status).toBe('running')
  })

  it('keeps the newest status when an older event comes late', () => {
    const s = reduce([
      { type: 'trace', event: ev(2, 'started') },
      { type: 'trace', event: ev(1, 'admitted') },
    ])
    expect(s.events.map((e) => e.seq)).toEqual([1, 2])
    expect(s.status).toBe('running')
  })

  it('shows pause and resume', () => {
    let s = reduce([
      { type: 'trace', event: ev(1, 'started') },
      { type: 'trace', event: ev(2, 'paused', { budget_tokens: 10, budget_used: 10 }) },
    ])
    expect(s.status).toBe('paused')
    expect(s.ended).toBe(false)
    s = liveReducer(s, { type: 'trace', event: ev(3, 'resumed') })
    expect(s.status).toBe('running')
  })

  it('ends on killed, cancelled and errored', () => {
    for (const status of ['killed', 'cancelled', 'errored'] as const) {
      const s = reduce([{ type: 'trace', event: ev(1, 'ended', { status, reason: `it was ${status}` }) }])
      expect(s.status).toBe(status)
      expect(s.ended).toBe(true)
    }
  })

  it('treats a reconciled run as ended', () => {
    const s = reduce([{ type: 'trace', event: ev(1, 'reconciled', { previous_status: 'running' }) }])
    expect(s.status).toBe('reconciled')
    expect(s.ended).toBe(true)
  })

  it('drops deltas after the end', () => {
    const s = reduce([
      { type: 'trace', event: ev(1, 'ended', { status: 'completed' }) },
      { type: 'delta', content: 'late' },
    ])
    expect(s.streaming).toBe('')
  })

  it('stops following on an error event', () => {
    const s = reduce([
      { type: 'trace', event: ev(1, 'started') },
      { type: 'delta', content: 'par' },
      { type: 'error', message: 'You no longer have access to this agent.' },
    ])
    expect(s.error).toBe('You no longer have access to this agent.')
    expect(s.streaming).toBe('')
    expect(s.ended).toBe(false)
    expect(finished(s)).toBe(true)
  })

  it('takes a final status read from the API', () => {
    const s = reduce([
      { type: 'trace', event: ev(1, 'started') },
      { type: 'run', run: run({ status: 'killed', reason: 'killed by Alice', change_set_id: 'chg_2' }) },
    ])
    expect(s.status).toBe('killed')
    expect(s.ended).toBe(true)
    expect(s.reason).toBe('killed by Alice')
    expect(s.changeSetId).toBe('chg_2')
  })

  it('ignores a snapshot of another run, and an active snapshot after the end', () => {
    let s = reduce([{ type: 'run', run: run({ id: 'run_other', status: 'completed' }) }])
    expect(s.ended).toBe(false)
    s = reduce([
      { type: 'trace', event: ev(1, 'ended', { status: 'completed' }) },
      { type: 'run', run: run({ status: 'running' }) },
    ])
    expect(s.status).toBe('completed')
  })

  it('starts ended for a run known to be over', () => {
    expect(initialLive('run_1', 'completed').ended).toBe(true)
    expect(initialLive('run_1', 'running').ended).toBe(false)
  })
})

describe('parseData', () => {
  it('parses JSON and refuses the rest', () => {
    expect(parseData<{ content: string }>('{"content":"x"}')).toEqual({ content: 'x' })
    expect(parseData('not json')).toBeUndefined()
    expect(parseData(undefined)).toBeUndefined()
  })
})

describe('summarize', () => {
  const follow = (r: Run, events: TraceEvent[]): LiveState => events.reduce((s, event) => liveReducer(s, { type: 'trace', event }), initialLive(r.id, r.status))
  const cases: { name: string; run: Partial<Run>; events: TraceEvent[]; status: string; tokens: [number, number]; started: string | null; ended: string | null }[] = [
    { name: 'nothing streamed yet: the run as read', run: { status: 'admitted' }, events: [], status: 'admitted', tokens: [0, 0], started: null, ended: null },
    {
      name: 'a terminal run read as admitted, started since',
      run: { status: 'admitted', driver: 'terminal' },
      events: [ev(1, 'admitted'), ev(2, 'started', { driver: 'terminal' })],
      status: 'running',
      tokens: [0, 0],
      started: '2025-01-01T00:00:02Z',
      ended: null,
    },
    {
      name: 'usage added up while it runs, never below what was read',
      run: { status: 'running', tokens: { input: 500, output: 0 }, started_at: '2025-01-01T00:00:00Z' },
      events: [ev(1, 'started'), ev(2, 'usage', { input: 100, output: 20 }), ev(3, 'usage', { input: 50, output: 5 })],
      status: 'running',
      tokens: [500, 25],
      started: '2025-01-01T00:00:00Z',
      ended: null,
    },
    {
      name: 'ended: its status and total win over a run read just before its final status was written',
      run: { status: 'running' },
      events: [ev(1, 'started'), ev(2, 'usage', { input: 100, output: 20 }), ev(3, 'ended', { status: 'completed', tokens: { input: 110, output: 21 } })],
      status: 'completed',
      tokens: [110, 21],
      started: '2025-01-01T00:00:01Z',
      ended: '2025-01-01T00:00:03Z',
    },
  ]
  for (const c of cases) {
    it(c.name, () => {
      const r = run(c.run)
      const s = summarize(r, follow(r, c.events))
      expect(s.status).toBe(c.status)
      expect([s.tokens.input, s.tokens.output]).toEqual(c.tokens)
      expect(s.startedAt).toBe(c.started)
      expect(s.endedAt).toBe(c.ended)
    })
  }
  it('ignores the state of another run', () => {
    const r = run({ status: 'admitted' })
    expect(summarize(r, follow(run({ id: 'run_2' }), [ev(1, 'started')])).status).toBe('admitted')
  })
})

describe('formatDuration', () => {
  const at = (s: number) => new Date(Date.UTC(2025, 0, 1, 0, 0, s)).toISOString()
  const cases: [string | null, string | null, string][] = [
    [null, null, '—'],
    [at(0), at(45), '45 s'],
    [at(0), at(185), '3 min 5 s'],
    [at(0), at(7440), '2 h 4 min'],
    [at(10), at(0), '0 s'],
  ]
  for (const [from, to, want] of cases) it(`${from} → ${to}: ${want}`, () => expect(formatDuration(from, to)).toBe(want))
  it('counts to now while it goes', () => expect(formatDuration(at(0), null, Date.UTC(2025, 0, 1, 0, 0, 30))).toBe('30 s'))
})
