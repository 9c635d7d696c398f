// A run's page names its kind (an agent CLI's, a terminal's, or the agent
// loop's plain run), its timeline reads an agent CLI's trace in words, and
// the CLI's live output is said to be the CLI's.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { act, render, screen, waitFor, within } from '@testing-library/react'
import { RunPage } from './pages/Run'
import { RunView } from './RunView'
import { agentAt, canAt, FakeEventSource, serveRoutes } from './testkit'
import type { Run, RunDriver, TraceEvent, TraceType } from './types'

function run(driver: RunDriver | undefined, status: Run['status'] = 'completed'): Run {
  return {
    id: 'run_abcdef12',
    agent_id: 'agt_1',
    status,
    triggered_by: { id: 'usr_me', name: 'Me' },
    parent_run_id: null,
    root_run_id: 'run_abcdef12',
    depth: 0,
    message_id: 'msg_1',
    driver: driver as RunDriver, // undefined: a server older than drivers sent none
    change_set_id: null,
    tokens: { input: 0, output: 0 },
    violation: null,
    reason: '',
    created_at: '2025-01-01T00:00:00Z',
    started_at: null,
    ended_at: null,
  }
}

function ev(seq: number, type: TraceType, data: Record<string, unknown>): TraceEvent {
  return { seq, at: '2025-01-01T00:00:00Z', type, data, hash: '', prev_hash: '' }
}

function serve(r: Run, trace: TraceEvent[] = []) {
  return serveRoutes((method, url) => {
    if (method !== 'GET') return undefined
    if (url === '/api/runs/run_abcdef12') return [200, r]
    if (url === '/api/runs/run_abcdef12/trace') return [200, { items: trace }]
    if (url === '/api/runs/run_abcdef12/tree') return [200, { items: [r] }]
    if (url === '/api/agents/agt_1') return [200, agentAt('viewer')]
    return undefined
  })
}

beforeEach(() => {
  FakeEventSource.last = null
  vi.stubGlobal('EventSource', FakeEventSource)
})
afterEach(() => vi.unstubAllGlobals())

describe('RunPage title', () => {
  const cases: { driver: RunDriver | undefined; kind: string }[] = [
    { driver: 'codex', kind: 'Codex CLI run' },
    { driver: 'claude-code', kind: 'Claude Code run' },
    { driver: 'opencode', kind: 'OpenCode run' },
    { driver: 'terminal', kind: 'Terminal run' },
    { driver: 'builtin', kind: 'Run' },
    { driver: undefined, kind: 'Run' },
  ]
  for (const c of cases) {
    it(`names a ${c.driver ?? 'driverless'} run “${c.kind}”`, async () => {
      serve(run(c.driver))
      render(<RunPage id="run_abcdef12" />)
      expect((await screen.findByRole('heading', { level: 1 })).textContent).toBe(`${c.kind} abcdef12`)
      await waitFor(() => expect(screen.getByRole('status').textContent).toMatch(new RegExp(`^${c.kind} status: completed`)))
      expect(document.title).toBe(`${c.kind} abcdef12 · Corral`)
    })
  }
})

describe('RunPage timeline of an agent CLI run', () => {
  it('reads the CLI’s steps, the gateway’s note and estimated usage in words', async () => {
    serve(run('claude-code'), [
      ev(1, 'started', { driver: 'claude-code', model: 'sonnet' }),
      ev(2, 'tool_call', { id: 'cli-1', name: 'claude-code', command: 'cli-1' }),
      ev(3, 'gateway_note', { protocol: 'messages', dropped: ['web_search'] }),
      ev(4, 'usage', { input: 300, output: 12, protocol: 'messages', model: 'sonnet', status: 200, estimated: true }),
      ev(5, 'transcript', { kind: 'tool_call', id: 'toolu_1', name: 'Bash', args: '{"command":"go test ./..."}' }),
      ev(6, 'transcript', { kind: 'tool_result', id: 'toolu_1', name: 'Bash', text: 'ok corral', is_error: false }),
      ev(7, 'transcript', { kind: 'message', text: 'The tests pass.' }),
      ev(8, 'tool_result', { id: 'cli-1', name: 'claude-code', exit_code: 0, output: '{"type":"result"}' }),
      ev(9, 'ended', { status: 'completed', reason: 'the claude-code CLI finished' }),
    ])
    render(<RunPage id="run_abcdef12" />)
    const timeline = await screen.findByRole('list', { name: 'Run timeline' })
    const titles = [...timeline.querySelectorAll('.tl-title')].map((t) => t.textContent)
    expect(titles).toEqual([
      'Started',
      'Claude Code started',
      'The gateway left out: web_search',
      'Tokens (estimated): 300 in, 12 out',
      'Ran a command',
      'Message',
      'Claude Code finished',
      'Ended: completed',
    ])
    const w = within(timeline)
    expect(w.getByText('$ go test ./...')).toBeTruthy()
    // The command's output, folded under it; the message as Markdown.
    expect(w.getByText('Output (1 line)').closest('details')?.textContent).toContain('ok corral')
    expect(w.getByText('The tests pass.').closest('.md')).toBeTruthy()
    // The CLI's JSON lines are its steps above, not shown again raw.
    expect(timeline.textContent).not.toContain('{"type":"result"}')
    expect(w.getByText('model sonnet · via Messages API')).toBeTruthy()
  })
})

describe('RunView live output', () => {
  const printed = '{"type":"item.started"}\nWARNING: proceeding, even though we could not create PATH aliases\n'
  const cases: { name: string; driver: RunDriver; id: string; content: string; says?: string; shown?: string }[] = [
    {
      name: 'a CLI’s output: only what it printed besides its JSON steps',
      driver: 'codex',
      id: 'cli-1',
      content: printed,
      says: 'Codex CLI is running; what it printed besides its steps:',
      shown: 'WARNING: proceeding, even though we could not create PATH aliases',
    },
    { name: 'a CLI that printed only its steps shows no output box', driver: 'codex', id: 'cli-1', content: '{"type":"item.started"}\n' },
    {
      name: 'a tool’s output in a builtin run is the command’s, as it is',
      driver: 'builtin',
      id: 'call_1',
      content: printed,
      says: 'The command is running; its output so far:',
      shown: printed,
    },
  ]
  for (const c of cases) {
    it(c.name, async () => {
      serve(run(c.driver, 'running'))
      render(<RunView run={run(c.driver, 'running')} can={canAt('viewer')} me={null} />)
      await waitFor(() => expect(FakeEventSource.last).not.toBeNull())
      act(() => FakeEventSource.last!.emit('output', { tool_call_id: c.id, content: c.content }))
      if (!c.says) {
        expect(screen.queryByRole('region', { name: 'Tool output so far' })).toBeNull()
        return
      }
      const live = screen.getByRole('region', { name: 'Tool output so far' })
      expect(live.querySelector('.muted')?.textContent).toBe(c.says)
      expect(live.querySelector('pre')?.textContent).toBe(c.shown)
    })
  }
})

describe('a running tool’s output across a new stream', () => {
  it('is shown once when the page opens the stream again from the start', async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true })
    try {
      serve(run('builtin', 'running'))
      render(<RunView run={run('builtin', 'running')} can={canAt('viewer')} me={null} />)
      await waitFor(() => expect(FakeEventSource.last).not.toBeNull())
      const first = FakeEventSource.last!
      act(() => first.emit('trace', ev(1, 'tool_call', { id: 'call_1', name: 'shell' })))
      act(() => first.emit('output', { tool_call_id: 'call_1', content: 'first\n' }))
      // The stream is refused outright (the browser will not retry): the
      // page asks where the run stands and opens a new one, which sends
      // the trace and the output so far from the start.
      act(() => {
        first.readyState = FakeEventSource.CLOSED
        first.emit('error', undefined)
      })
      await act(async () => {
        await vi.advanceTimersByTimeAsync(2500)
      })
      await waitFor(() => expect(FakeEventSource.last).not.toBe(first))
      const second = FakeEventSource.last!
      act(() => second.emit('trace', ev(1, 'tool_call', { id: 'call_1', name: 'shell' })))
      act(() => second.emit('output', { tool_call_id: 'call_1', content: 'first\nsecond\n' }))
      const live = screen.getByRole('region', { name: 'Tool output so far' })
      expect(live.querySelector('pre')?.textContent).toBe('first\nsecond\n')
    } finally {
      vi.useRealTimers()
    }
  })
})

/** The Status, Tokens and Duration facts of the run page's summary. */
function fact(name: string): string {
  const dt = screen.getAllByRole('term').find((t) => t.textContent === name)
  return dt?.nextElementSibling?.textContent ?? ''
}

describe('the run page’s summary follows the event stream', () => {
  it('moves a terminal run from admitted to running, then to ended when its person stops it', async () => {
    const admitted = run('terminal', 'admitted')
    serve(admitted)
    render(<RunPage id="run_abcdef12" />)
    await waitFor(() => expect(FakeEventSource.last).not.toBeNull())
    expect(fact('Status')).toBe('admitted')
    act(() => FakeEventSource.last!.emit('trace', ev(1, 'admitted', {})))
    act(() => FakeEventSource.last!.emit('trace', { ...ev(2, 'started', { driver: 'terminal' }), at: '2025-01-01T00:00:00Z' }))
    await waitFor(() => expect(fact('Status')).toBe('running'))
    expect(fact('Duration')).toMatch(/ so far$/)
    act(() =>
      FakeEventSource.last!.emit('trace', { ...ev(3, 'ended', { status: 'cancelled', reason: 'stopped on request' }), at: '2025-01-01T00:01:05Z' }),
    )
    await waitFor(() => expect(fact('Status')).toBe('ended'))
    expect(fact('Duration')).toBe('1 min 5 s')
    expect(screen.getByRole('status').textContent).toMatch(/^Terminal run status: ended/)
    expect(screen.getByRole('list', { name: 'Run timeline' }).textContent).toContain('Ended')
    expect(screen.getByRole('list', { name: 'Run timeline' }).textContent).not.toContain('cancelled')
  })

  it('keeps a real cancellation of a terminal run cancelled', async () => {
    serve({ ...run('terminal', 'cancelled'), reason: 'the person who started the run may no longer run this agent' }, [
      ev(1, 'ended', { status: 'cancelled', reason: 'the person who started the run may no longer run this agent' }),
    ])
    render(<RunPage id="run_abcdef12" />)
    await waitFor(() => expect(fact('Status')).toBe('cancelled'))
    await waitFor(() => expect(screen.getByRole('list', { name: 'Run timeline' }).textContent).toContain('Ended: cancelled'))
  })

  it('counts tokens as usage events come, then the end’s total', async () => {
    serve(run('builtin', 'running'))
    render(<RunPage id="run_abcdef12" />)
    await waitFor(() => expect(FakeEventSource.last).not.toBeNull())
    act(() => FakeEventSource.last!.emit('trace', ev(1, 'started', {})))
    act(() => FakeEventSource.last!.emit('trace', ev(2, 'usage', { input: 100, output: 20 })))
    act(() => FakeEventSource.last!.emit('trace', ev(3, 'usage', { input: 150, output: 30 })))
    await waitFor(() => expect(fact('Tokens')).toBe('250 in, 50 out'))
    act(() => FakeEventSource.last!.emit('trace', ev(4, 'ended', { status: 'completed', tokens: { input: 260, output: 55 } })))
    await waitFor(() => expect(fact('Tokens')).toBe('260 in, 55 out'))
    expect(fact('Status')).toBe('completed')
  })
})
