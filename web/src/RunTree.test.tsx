// A run's page and its delegation: the tree below the run nested with each
// run's agent, status, tokens, depth and link; no panel for a run that
// delegated nothing; the run that delegated this one linked, or said to be
// hidden; the timeline's words for delegation (a refused hop names its cap);
// the tree asked for again on a `delegated` event, and polled only while a
// run in it goes.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { act, render, screen, waitFor, within } from '@testing-library/react'
import { RunPage } from './pages/Run'
import { buildTree, RunTree, treeIntervalMs } from './RunTree'
import { agentAt, FakeEventSource, serveRoutes, type Answer } from './testkit'
import type { Run, TraceEvent, TraceType } from './types'

function run(id: string, over: Partial<Run> = {}): Run {
  return {
    id,
    agent_id: 'agt_1',
    status: 'completed',
    triggered_by: { id: 'usr_me', name: 'Me' },
    parent_run_id: null,
    root_run_id: 'run_root1234',
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
    ...over,
  }
}

function ev(seq: number, type: TraceType, data: Record<string, unknown>): TraceEvent {
  return { seq, at: '2025-01-01T00:00:00Z', type, data, hash: '', prev_hash: '' }
}

const root = run('run_root1234')
const child1 = run('run_child111', { agent_id: 'agt_2', parent_run_id: root.id, depth: 1, tokens: { input: 120, output: 30 } })
const grand = run('run_grand111', { agent_id: 'agt_3', parent_run_id: child1.id, depth: 2, status: 'errored' })
const child2 = run('run_child222', { agent_id: 'agt_2', parent_run_id: root.id, depth: 1, status: 'killed' })

interface Routes {
  run?: Run
  trace?: TraceEvent[]
  tree?: () => Answer
  parent?: Answer
}

/** The run page's API: the run, its trace and tree, its agent, the agent list (names) and the parent run. */
function serve(r: Routes) {
  const me = r.run ?? root
  return serveRoutes((method, url) => {
    if (method !== 'GET') return undefined
    if (url === `/api/runs/${me.id}`) return [200, me]
    if (url === `/api/runs/${me.id}/trace`) return [200, { items: r.trace ?? [] }]
    if (url === `/api/runs/${me.id}/tree`) return r.tree ? r.tree() : [200, { items: [me] }]
    if (url === '/api/agents/agt_1') return [200, agentAt('viewer')]
    if (url === '/api/agents') return [200, { items: [agentAt('viewer'), { ...agentAt('runner', 'agt_2'), name: 'reviewer' }] }]
    if (me.parent_run_id && url === `/api/runs/${me.parent_run_id}`) return r.parent
    return undefined
  })
}

beforeEach(() => {
  FakeEventSource.last = null
  vi.stubGlobal('EventSource', FakeEventSource)
})
afterEach(() => {
  vi.useRealTimers()
  vi.unstubAllGlobals()
})

/** The tree entry of a run: the list item its link opens. */
function entry(scope: HTMLElement, name: string): HTMLElement {
  const li = within(scope).getByRole('link', { name }).closest('li')
  if (!li) throw new Error(`no list item holds the link ${name}`)
  return li
}

describe('the Delegation panel', () => {
  it('nests the runs below this one with their agent, status, tokens, depth and link', async () => {
    serve({ tree: () => [200, { items: [root, child1, grand, child2] }] })
    render(<RunPage id={root.id} />)
    const panel = await screen.findByRole('region', { name: 'Delegation' })
    expect(within(panel).getByText('3 runs started from this one through delegation.')).toBeTruthy()

    const top = within(panel).getByRole('list', { name: 'Runs delegated from this run' })
    const direct = [...top.children].map((li) => li.getAttribute('data-run'))
    expect(direct).toEqual([child1.id, child2.id])

    const first = entry(top, 'run child111')
    expect(within(first).getByRole('link', { name: 'run child111' }).getAttribute('href')).toBe('/runs/run_child111')
    // Named from the agent list once it answers.
    const agentLink = await within(first).findAllByRole('link', { name: 'reviewer' })
    expect(agentLink[0].getAttribute('href')).toBe('/agents/agt_2')
    expect(first.querySelector('.tree-run .badge-status')?.textContent).toBe('completed')
    expect(within(first).getByText('120 in, 30 out tokens · depth 1')).toBeTruthy()

    const nested = within(first).getByRole('list', { name: 'Runs delegated from run child111' })
    const g = entry(nested, 'run grand111')
    expect(within(g).getByRole('link', { name: 'run grand111' }).getAttribute('href')).toBe('/runs/run_grand111')
    expect(g.querySelector('.badge-status')?.textContent).toBe('errored')
    // An agent the list does not name is shown by a short id.
    expect(within(g).getByRole('link', { name: '3' }).getAttribute('href')).toBe('/agents/agt_3')
    expect(within(g).getByText('0 in, 0 out tokens · depth 2')).toBeTruthy()

    const second = entry(top, 'run child222')
    expect(second.querySelector('.badge-status')?.textContent).toBe('killed')
    expect(within(second).queryByRole('list')).toBeNull()
  })

  it('is not shown for a run that delegated nothing', async () => {
    const calls = serve({ tree: () => [200, { items: [root] }] })
    render(<RunPage id={root.id} />)
    await screen.findByRole('heading', { level: 1 })
    await waitFor(() => expect(calls.some((c) => c.url === `/api/runs/${root.id}/tree`)).toBe(true))
    await screen.findByText('Nothing has happened yet.')
    expect(screen.queryByRole('region', { name: 'Delegation' })).toBeNull()
    expect(screen.queryByRole('heading', { name: 'Delegation' })).toBeNull()
  })
})

describe('buildTree', () => {
  it('leaves out a run whose parent is not in the answer, and never places a run twice', () => {
    const orphan = run('run_orphan11', { parent_run_id: 'run_hidden11', depth: 2 })
    const loop = run('run_child111', { parent_run_id: 'run_grand111' }) // a bad answer: child1 again, below its own child
    const tree = buildTree(root.id, [root, child1, grand, orphan, loop])
    const ids = (nodes: ReturnType<typeof buildTree>): string[] => nodes.flatMap((n) => [n.run.id, ...ids(n.children)])
    expect(ids(tree)).toEqual([child1.id, grand.id])
  })
})

describe('the run that delegated this one', () => {
  const cases: { name: string; parent: Answer; link: boolean; text: string }[] = [
    { name: 'is linked when the viewer may see it', parent: [200, run('run_parent12')], link: true, text: 'run parent12' },
    {
      name: 'is said to be hidden, without a link, when the viewer may not',
      parent: [404, { error: { code: 'not_found', message: 'run not found' } }],
      link: false,
      text: 'a run you cannot see',
    },
  ]
  for (const c of cases) {
    it(c.name, async () => {
      const me = run('run_mine1234', { parent_run_id: 'run_parent12', depth: 1 })
      serve({ run: me, parent: c.parent })
      render(<RunPage id={me.id} />)
      const fact = (await screen.findByText('Delegated by')).closest('.fact') as HTMLElement
      await waitFor(() => expect(within(fact).getByText(c.text)).toBeTruthy())
      const links = within(fact).queryAllByRole('link')
      if (c.link) {
        expect(links[0].getAttribute('href')).toBe('/runs/run_parent12')
        // And its agent, by name once the agent list answers.
        await waitFor(() => expect(fact.querySelector('dd')?.textContent).toBe('run parent12 of helper'))
        expect(within(fact).getByRole('link', { name: 'helper' }).getAttribute('href')).toBe('/agents/agt_1')
      } else expect(links).toEqual([])
      // Never the whole page's not-found view: the run itself is ours to see.
      expect(screen.getByRole('heading', { level: 1 }).textContent).toBe('Run mine1234')
      const depth = screen.getByText('Delegation depth').closest('.fact') as HTMLElement
      expect(within(depth).getByText('1')).toBeTruthy()
    })
  }
})

describe('the timeline of a run that delegates', () => {
  it('links the delegated run, names a refused hop’s cap and the agent it created', async () => {
    serve({
      trace: [
        ev(1, 'started', { model: 'scripted' }),
        ev(2, 'tool_call', { id: 'c1', name: 'delegate', arguments: '{"agent_id":"agt_2","task":"review"}' }),
        ev(3, 'delegated', { tool_call_id: 'c1', run_id: 'run_child111', agent_id: 'agt_2', depth: 1 }),
        ev(4, 'delegation_refused', {
          tool: 'delegate',
          tool_call_id: 'c2',
          target: 'agt_2',
          error: 'this run has delegated to 4 runs, the most one run may',
          cap: 'delegation_fanout',
        }),
        ev(5, 'agent_created', { tool_call_id: 'c3', agent_id: 'agt_new12345', name: 'linter', fs: 'read-only' }),
        ev(6, 'ended', { status: 'completed' }),
      ],
    })
    render(<RunPage id={root.id} />)
    const timeline = await screen.findByRole('list', { name: 'Run timeline' })
    const item = (seq: number) => timeline.children[seq - 1] as HTMLElement

    // Named from the agent list once it answers.
    await waitFor(() => expect(item(3).querySelector('.tl-title')?.textContent).toBe('Delegated to reviewer:'))
    expect(within(item(3)).getByRole('link', { name: 'run child111' }).getAttribute('href')).toBe('/runs/run_child111')
    expect(item(3).querySelector('.tl-facts')?.textContent).toBe('depth 1')

    expect(item(4).querySelector('.tl-title')?.textContent).toBe('Delegation refused: this run has delegated to 4 runs, the most one run may')
    expect(item(4).querySelector('.tl-facts')?.textContent).toBe('cap: delegation_fanout · agent reviewer')
    expect(item(4).querySelector('.tl-detail')?.textContent).toContain('--delegation-fanout')
    expect(item(4).className).toContain('tl-warn')

    expect(item(5).querySelector('.tl-title')?.textContent).toBe('Created agent linter')
    expect(within(item(5)).getByRole('link', { name: 'agent new12345' }).getAttribute('href')).toBe('/agents/agt_new12345')
  })
})

describe('following the tree', () => {
  it('asks for the tree again on a delegated event', async () => {
    const going = { ...root, status: 'running' as const }
    const child = { ...child1, status: 'running' as const }
    let trees = 0
    const calls = serve({ run: going, tree: () => [200, { items: trees++ === 0 ? [going] : [going, child] }] })
    render(<RunPage id={going.id} />)
    await waitFor(() => expect(FakeEventSource.last).not.toBeNull())
    await waitFor(() => expect(calls.filter((c) => c.url.endsWith('/tree')).length).toBe(1))
    expect(screen.queryByRole('region', { name: 'Delegation' })).toBeNull()
    act(() => FakeEventSource.last!.emit('trace', ev(1, 'delegated', { tool_call_id: 'c1', run_id: child.id, agent_id: 'agt_2', depth: 1 })))
    // Long before the slow poll's first turn.
    const panel = await screen.findByRole('region', { name: 'Delegation' })
    expect(within(panel).getByText('1 run started from this one through delegation, 1 still going.')).toBeTruthy()
    expect(entry(panel, 'run child111').querySelector('.badge-status')?.textContent).toBe('running')
    const asked = calls.filter((c) => c.url.endsWith('/tree')).length
    expect(asked).toBe(2)
    // A reconnected stream replays the trace: the same delegated run does not ask again.
    act(() => FakeEventSource.last!.emit('trace', ev(1, 'delegated', { tool_call_id: 'c1', run_id: child.id, agent_id: 'agt_2', depth: 1 })))
    await act(() => Promise.resolve())
    expect(calls.filter((c) => c.url.endsWith('/tree')).length).toBe(asked)
  })

  it('polls while a run in the tree goes and stops once all are final', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    const answers = [
      [root, { ...child1, status: 'running' as const }],
      [root, { ...child1, status: 'paused' as const }],
      [root, child1],
    ]
    let trees = 0
    serve({ tree: () => [200, { items: answers[Math.min(trees++, answers.length - 1)] }] })
    render(<RunTree run={root} />)
    const badge = () => document.querySelector('[data-run="run_child111"] .badge-status')?.textContent
    const settle = () => act(() => vi.advanceTimersByTimeAsync(0))
    await settle()
    expect(trees).toBe(1)
    expect(badge()).toBe('running')

    await act(() => vi.advanceTimersByTimeAsync(treeIntervalMs))
    expect(trees).toBe(2)
    expect(badge()).toBe('paused')

    await act(() => vi.advanceTimersByTimeAsync(treeIntervalMs))
    expect(trees).toBe(3)
    expect(badge()).toBe('completed')

    // Everything is final: no more requests however long the page stays.
    await act(() => vi.advanceTimersByTimeAsync(20 * treeIntervalMs))
    expect(trees).toBe(3)
  })
})
