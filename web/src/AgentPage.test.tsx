// The agent page offers each level only what it allows, names an agent
// CLI's runs, and follows a live run over a (fake) event stream.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { act, render, screen, waitFor } from '@testing-library/react'
import { AgentPage } from './pages/Agent'
import { SessionContext } from './session'
import { agentAt, FakeEventSource } from './testkit'
import type { Agent, Driver, Level, Run, User } from './types'

const me: User = { id: 'usr_me', email: 'me@example.com', name: 'Me', admin: false, disabled: false, created_at: '2025-01-01T00:00:00Z' }

function agent(access: Level, driver: Driver = 'builtin'): Agent {
  return { ...agentAt(access), driver }
}

function run(status: Run['status'], by = me.id): Run {
  return {
    id: 'run_1',
    agent_id: 'agt_1',
    status,
    triggered_by: { id: by, name: 'Someone' },
    parent_run_id: null,
    root_run_id: 'run_1',
    depth: 0,
    message_id: 'msg_1',
    driver: 'builtin',
    change_set_id: null,
    tokens: { input: 0, output: 0 },
    violation: null,
    reason: '',
    created_at: '2025-01-01T00:00:00Z',
    started_at: null,
    ended_at: null,
  }
}

function serve(level: Level, runs: Run[], driver: Driver = 'builtin') {
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string) => {
      const path = url.split('?')[0]
      const body: unknown =
        path === '/api/agents/agt_1'
          ? agent(level, driver)
          : path.endsWith('/messages')
            ? { items: [{ id: 'msg_1', role: 'user', content: 'hello there', author: me, run_id: 'run_1', created_at: '2025-01-01T00:00:00Z' }] }
            : path.endsWith('/runs')
              ? { items: runs }
              : { items: [] }
      return new Response(JSON.stringify(body), { status: 200 })
    }),
  )
}

/** Waits for the run view's effect to open its stream. */
async function stream(): Promise<FakeEventSource> {
  await waitFor(() => expect(FakeEventSource.last).not.toBeNull())
  return FakeEventSource.last!
}

function page() {
  return render(
    <SessionContext.Provider value={{ user: me, setUser: () => {} }}>
      <AgentPage id="agt_1" />
    </SessionContext.Provider>,
  )
}

beforeEach(() => {
  FakeEventSource.last = null
  vi.stubGlobal('EventSource', FakeEventSource)
})

afterEach(() => vi.unstubAllGlobals())

describe('AgentPage per level, with a run of mine going', () => {
  const cases: { level: Level; send: boolean; stop: boolean; kill: boolean; sharing: boolean; terminal: boolean }[] = [
    { level: 'viewer', send: false, stop: false, kill: false, sharing: false, terminal: false },
    { level: 'runner', send: true, stop: true, kill: false, sharing: false, terminal: false },
    { level: 'editor', send: true, stop: true, kill: true, sharing: false, terminal: true },
    { level: 'owner', send: true, stop: true, kill: true, sharing: true, terminal: true },
  ]
  for (const c of cases) {
    it(`offers a ${c.level} only what it may do`, async () => {
      serve(c.level, [run('running')])
      page()
      await screen.findByText('hello there')
      await screen.findByRole('status')
      await stream()
      expect(screen.queryAllByRole('textbox', { name: 'Message' })).toHaveLength(c.send ? 1 : 0)
      expect(screen.queryAllByRole('button', { name: 'Send' })).toHaveLength(c.send ? 1 : 0)
      expect(screen.queryAllByRole('button', { name: 'Stop' })).toHaveLength(c.stop ? 1 : 0)
      expect(screen.queryAllByRole('button', { name: 'Kill' })).toHaveLength(c.kill ? 1 : 0)
      expect(screen.queryAllByRole('link', { name: 'Sharing' })).toHaveLength(c.sharing ? 1 : 0)
      expect(screen.queryAllByRole('button', { name: 'Start a terminal run' })).toHaveLength(c.terminal ? 1 : 0)
    })
  }

  it('does not offer a runner Stop on someone else’s run', async () => {
    serve('runner', [run('running', 'usr_other')])
    page()
    await screen.findByRole('status')
    await stream()
    expect(screen.queryAllByRole('button', { name: 'Stop' })).toHaveLength(0)
  })
})

describe('AgentPage and its driver', () => {
  afterEach(() => window.history.replaceState(null, '', '/'))

  const hints: { driver: Driver; hint: string }[] = [
    { driver: 'opencode', hint: 'Ctrl+Enter sends. Each message starts a run of OpenCode in the agent’s sandbox.' },
    { driver: 'builtin', hint: 'Ctrl+Enter sends. Each message starts a run.' },
  ]
  for (const c of hints) {
    it(`says what a message starts for a ${c.driver} agent`, async () => {
      serve('runner', [], c.driver)
      page()
      const box = await screen.findByRole('textbox', { name: 'Message' })
      expect(document.getElementById(box.getAttribute('aria-describedby') ?? '')?.textContent).toBe(c.hint)
    })
  }

  it('names each run’s driver in the runs list, and none for the agent loop’s', async () => {
    window.history.replaceState(null, '', '/agents/agt_1?tab=runs')
    const runs: Run[] = [
      { ...run('completed'), id: 'run_cli', driver: 'codex' },
      { ...run('completed'), id: 'run_term', driver: 'terminal' },
      { ...run('completed'), id: 'run_loop', driver: 'builtin' },
    ]
    serve('viewer', runs, 'codex')
    page()
    await screen.findByRole('link', { name: 'run cli' })
    const rows = screen.getAllByRole('rowheader').map((th) => th.textContent)
    expect(rows).toEqual(['run cli · Codex CLI', 'run term · Terminal', 'run loop'])
  })
})

describe('AgentPage terminal run', () => {
  it('starts one and goes to its run page', async () => {
    serve('editor', [])
    const fetchFn = globalThis.fetch as ReturnType<typeof vi.fn>
    fetchFn.mockImplementation(async (url: string, init?: RequestInit) => {
      const path = url.split('?')[0]
      if (path === '/api/agents/agt_1/terminal' && init?.method === 'POST') {
        return new Response(JSON.stringify({ run: { ...run('admitted'), id: 'run_term', driver: 'terminal', message_id: '' } }), { status: 201 })
      }
      const body: unknown = path === '/api/agents/agt_1' ? agent('editor') : { items: [] }
      return new Response(JSON.stringify(body), { status: 200 })
    })
    page()
    const button = await screen.findByRole('button', { name: 'Start a terminal run' })
    act(() => button.click())
    await waitFor(() => expect(window.location.pathname).toBe('/runs/run_term'))
    expect(fetchFn.mock.calls.some(([u, i]) => u === '/api/agents/agt_1/terminal' && (i as RequestInit | undefined)?.method === 'POST')).toBe(true)
    window.history.replaceState(null, '', '/')
  })
})

describe('AgentPage live run', () => {
  it('shows tool output as it comes and the end status', async () => {
    serve('owner', [run('running')])
    page()
    await screen.findByRole('status')
    const es = await stream()
    expect(es.url).toBe('/api/runs/run_1/events')
    const ev = (seq: number, type: string, data: object) => ({ seq, at: '2025-01-01T00:00:00Z', type, data, hash: '', prev_hash: '' })
    act(() => {
      es.emit('trace', ev(1, 'started', {}))
      es.emit('trace', ev(2, 'tool_call', { name: 'shell', arguments: '{"command":"echo looked"}' }))
      es.emit('trace', ev(3, 'tool_result', { name: 'shell', exit_code: 0, output: 'looked\n' }))
      es.emit('delta', { content: 'Done' })
    })
    expect(screen.getByText('$ echo looked')).toBeTruthy()
    expect(screen.getByText('Tool output: shell')).toBeTruthy()
    expect(screen.getByText('Done')).toBeTruthy()
    expect(screen.getByRole('status').textContent).toContain('running')
    expect(screen.getByRole('heading', { level: 2, name: /^Run in progress/ })).toBeTruthy()
    act(() => es.emit('trace', ev(4, 'ended', { status: 'completed', reason: 'the model answered' })))
    expect(screen.getByRole('status').textContent).toContain('completed')
    // The stream said so: the heading does not wait for the runs list (which here still says running).
    expect(screen.getByRole('heading', { level: 2, name: /^Latest run/ })).toBeTruthy()
    expect(es.readyState).toBe(FakeEventSource.CLOSED)
    expect(screen.queryAllByRole('button', { name: 'Stop' })).toHaveLength(0)
  })

  it('shows a lost access and stops following', async () => {
    serve('viewer', [run('running', 'usr_other')])
    page()
    await screen.findByRole('status')
    const es = await stream()
    act(() => es.emit('error', { error: { code: 'not_found', message: 'You no longer have access to this run.' } }))
    expect(screen.getByText('You no longer have access to this run.')).toBeTruthy()
    expect(es.readyState).toBe(FakeEventSource.CLOSED)
  })
})
