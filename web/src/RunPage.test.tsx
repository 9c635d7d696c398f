// A run's page names its kind (an agent CLI's, a terminal's, or the agent
// loop's plain run), its timeline reads an agent CLI's trace in words, and
// the CLI's live output is said to be the CLI's.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { act, render, screen, waitFor, within } from '@testing-library/react'
import { RunPage } from './pages/Run'
import { RunView } from './RunView'
import { agentAt, FakeEventSource, serveRoutes } from './testkit'
import type { Run, RunDriver, TraceEvent } from './types'

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
    driver,
    change_set_id: null,
    tokens: { input: 0, output: 0 },
    violation: null,
    reason: '',
    created_at: '2025-01-01T00:00:00Z',
    started_at: null,
    ended_at: null,
  }
}

function ev(seq: number, type: string, data: Record<string, unknown>): TraceEvent {
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
      'CLI tool call: Bash',
      'CLI tool output: Bash',
      'CLI message',
      'Claude Code ended',
      'Ended: completed',
    ])
    const w = within(timeline)
    expect(w.getByText('$ go test ./...')).toBeTruthy()
    expect(w.getByText('The tests pass.')).toBeTruthy()
    expect(w.getByText('model sonnet · via Messages API')).toBeTruthy()
  })
})

describe('RunView live output', () => {
  const cases: { name: string; driver: RunDriver; id: string; says: string }[] = [
    { name: 'a CLI’s output is the CLI’s', driver: 'codex', id: 'cli-1', says: 'Codex CLI is running; what it printed so far:' },
    { name: 'a tool’s output in a builtin run is the command’s', driver: 'builtin', id: 'call_1', says: 'The command is running; its output so far:' },
  ]
  for (const c of cases) {
    it(c.name, async () => {
      serve(run(c.driver, 'running'))
      render(<RunView run={run(c.driver, 'running')} level="viewer" me={null} />)
      await waitFor(() => expect(FakeEventSource.last).not.toBeNull())
      act(() => FakeEventSource.last!.emit('output', { tool_call_id: c.id, content: '{"type":"item.started"}' }))
      const live = screen.getByRole('region', { name: 'Tool output so far' })
      expect(live.querySelector('.muted')?.textContent).toBe(c.says)
      expect(within(live).getByText('{"type":"item.started"}')).toBeTruthy()
    })
  }
})
