// Where work waits: the inbox page, the count on the header's Inbox link,
// the badge on each agent in the list, and the call to action on the
// conversation after a run leaves a change set.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { act, render, screen, waitFor, within } from '@testing-library/react'
import { App } from './App'
import { InboxPage } from './pages/Inbox'
import { AgentsPage } from './pages/Agents'
import { ReviewCallout } from './ReviewCallout'
import { inboxStale } from './review'
import { agentAt, serveRoutes } from './testkit'
import type { ChangeSet, Level, WaitingChangeSet } from './types'

beforeEach(() => window.history.replaceState(null, '', '/'))
afterEach(() => vi.unstubAllGlobals())

function waiting(id: string, agent: string, pending: number, total: number, disk = 4096): WaitingChangeSet {
  return {
    id, agent_id: `agt_${agent}`, agent_name: agent, run_id: 'run_abcdefgh1', status: 'pending',
    pending_entries: pending, total_entries: total, disk_bytes: disk, created_at: '2025-01-01T00:00:00Z', expires_at: '2025-01-08T00:00:00Z',
  }
}

describe('InboxPage', () => {
  it('lists each change set waiting, with its agent, how many files wait and what it holds on disk', async () => {
    serveRoutes((_, url) => (url === '/api/changes?status=pending' ? [200, { items: [waiting('chg_newer0001', 'docs', 1, 3, 512), waiting('chg_older0001', 'hello', 2, 2, 3 << 29)] }] : undefined))
    const counted = vi.fn()
    render(<InboxPage onCount={counted} />)
    const rows = within(await screen.findByRole('table')).getAllByRole('row').slice(1)
    expect(rows.map((r) => [...r.querySelectorAll('th, td')].slice(0, 4).map((c) => c.textContent))).toEqual([
      ['change set newer000 from run abcdefgh', 'docs', '1 file waits for your review (of 3)', '512 B'],
      ['change set older000 from run abcdefgh', 'hello', '2 files wait for your review', '1.5 GiB'],
    ])
    expect(within(rows[1]).getByRole('link', { name: 'change set older000' }).getAttribute('href')).toBe('/changes/chg_older0001')
    expect(within(rows[1]).getByRole('link', { name: 'hello' }).getAttribute('href')).toBe('/agents/agt_hello')
    // Told from an effect after the render: waited for, not assumed (CI
    // once asserted it before the effect ran).
    await waitFor(() => expect(counted).toHaveBeenCalledWith(2))
  })

  it('says when nothing waits', async () => {
    serveRoutes((_, url) => (url === '/api/changes?status=pending' ? [200, { items: [] }] : undefined))
    render(<InboxPage />)
    expect(await screen.findByText('Nothing waits for your review.')).toBeTruthy()
  })
})

describe('the header', () => {
  function serve(items: WaitingChangeSet[]) {
    return serveRoutes((_, url) => {
      if (url === '/api/me') return [200, { user: { id: 'usr_1', email: 'a@example.com', name: 'Alice', admin: true } }]
      if (url === '/api/changes?status=pending') return [200, { items }]
      if (url === '/api/agents') return [200, { items: [] }]
      return undefined
    })
  }

  it('counts what waits on the Inbox link, next to Agents and Library', async () => {
    serve([waiting('chg_1', 'a', 1, 1), waiting('chg_2', 'b', 2, 2)])
    render(<App />)
    const nav = await screen.findByRole('navigation', { name: 'Main' })
    await waitFor(() => expect(within(nav).getByRole('link', { name: /^Inbox/ }).textContent).toBe('Inbox2 (2 waiting)'))
    expect(within(nav).getAllByRole('link').map((l) => l.getAttribute('href'))).toEqual(['/', '/library', '/inbox', '/admin'])
  })

  it('asks again when a page says what waits may have moved', async () => {
    let items = [waiting('chg_1', 'a', 1, 1)]
    serveRoutes((_, url) => {
      if (url === '/api/me') return [200, { user: { id: 'usr_1', email: 'a@example.com', name: 'Alice', admin: true } }]
      if (url === '/api/changes?status=pending') return [200, { items }]
      if (url === '/api/agents') return [200, { items: [] }]
      return undefined
    })
    render(<App />)
    const nav = await screen.findByRole('navigation', { name: 'Main' })
    await waitFor(() => expect(within(nav).getByRole('link', { name: /^Inbox/ }).textContent).toBe('Inbox1 (1 waiting)'))
    items = []
    act(() => inboxStale())
    await waitFor(() => expect(within(nav).getByRole('link', { name: /^Inbox/ }).textContent).toBe('Inbox'))
  })

  it('shows no count when nothing waits', async () => {
    const calls = serve([])
    render(<App />)
    const nav = await screen.findByRole('navigation', { name: 'Main' })
    await waitFor(() => expect(calls.some((c) => c.url === '/api/changes?status=pending')).toBe(true))
    expect(within(nav).getByRole('link', { name: /^Inbox/ }).textContent).toBe('Inbox')
  })
})

describe('AgentsPage', () => {
  it('badges an agent whose change sets wait, linking to its Changes tab', async () => {
    serveRoutes((_, url) =>
      url === '/api/agents' ? [200, { items: [{ ...agentAt('owner', 'agt_1'), name: 'busy', pending_changes: 2 }, { ...agentAt('owner', 'agt_2'), name: 'idle', pending_changes: 0 }] }] : undefined,
    )
    render(<AgentsPage />)
    const busy = (await screen.findByRole('link', { name: 'busy' })).closest('tr')!
    expect(within(busy).getByRole('link', { name: '(2 waiting)' }).getAttribute('href')).toBe('/agents/agt_1?tab=changes')
    const idle = screen.getByRole('link', { name: 'idle' }).closest('tr')!
    expect(within(idle).queryByText(/waiting/)).toBeNull()
  })
})

describe('ReviewCallout', () => {
  function set(id: string, status: ChangeSet['status'], ...states: ChangeSet['entries'][number]['state'][]): ChangeSet {
    return {
      id, run_id: 'run_1', agent_id: 'agt_1', status, mode: 'review', created_at: '2025-01-01T00:00:00Z', expires_at: '2025-01-08T00:00:00Z',
      decided_by: null, decided_at: null, disk_bytes: 0,
      entries: states.map((state, i) => ({ path: `f${i}`, path_escaped: `f${i}`, op: 'create', old_sha256: '', new_sha256: 'a', size: 1, mode: '-rw-r--r--', class: 'ordinary', flags: [], note: '', state })),
    }
  }
  const cases: { name: string; access: Level; changes: ChangeSet[]; text: string | null; to?: string }[] = [
    { name: 'nothing waits', access: 'owner', changes: [set('chg_a', 'applied', 'applied')], text: null },
    { name: 'two files wait for the owner', access: 'owner', changes: [set('chg_b', 'pending', 'pending', 'pending')], text: '2 files wait for your review. Review the change set', to: '/changes/chg_b' },
    { name: 'the newest of several', access: 'editor', changes: [set('chg_c', 'pending', 'pending'), set('chg_d', 'pending', 'pending')], text: '1 file waits for your review. Review the change set · 1 more change set waiting', to: '/changes/chg_c' },
    { name: 'a viewer is told who decides', access: 'viewer', changes: [set('chg_e', 'pending', 'pending', 'applied')], text: '1 file waits for review by an editor or the owner. See the change set', to: '/changes/chg_e' },
  ]
  for (const c of cases) {
    it(c.name, () => {
      render(<ReviewCallout agent={agentAt(c.access)} changes={c.changes} />)
      const region = screen.queryByRole('region', { name: 'Waiting for review' })
      if (c.text === null) {
        expect(region).toBeNull()
        return
      }
      expect(region?.textContent).toBe(c.text)
      expect(within(region!).getAllByRole('link')[0].getAttribute('href')).toBe(c.to)
    })
  }
})
