// The administrators' page: people, nodes, runs in flight, usage and
// budgets, each against the API's answers; the header's Admin link; and
// the invite link a person signs up with.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen, waitFor, within } from '@testing-library/react'
import { App } from './App'
import { AdminPage } from './pages/Admin'
import { SessionContext } from './session'
import { serveRoutes, type Answer } from './testkit'
import { lastDays, series } from './UsageChart'
import type { Usage, User } from './types'

const admin: User = { id: 'usr_admin', email: 'root@example.com', name: 'Root', admin: true, disabled: false, created_at: '2026-01-01T00:00:00Z' }
const bob = { id: 'usr_bob', email: 'bob@example.com', name: 'Bob', admin: false, disabled: false, created_at: '2026-01-02T00:00:00Z', email_mixed_script: false }
const today = lastDays(1)[0]

function usage(groupBy: Usage['group_by'], groups: [string, number][]): Usage {
  return {
    group_by: groupBy, scope: 'all', since: null, until: null,
    groups: groups.map(([name, total]) => ({
      key: name, name, calls: 1, runs: 1, tokens: { input: total, output: 0, total },
      days: [{ day: today, calls: 1, runs: 1, tokens: { input: total, output: 0, total } }],
    })),
  }
}

function routes(extra: (method: string, url: string) => Answer | undefined = () => undefined) {
  return serveRoutes((method, url) => {
    const e = extra(method, url)
    if (e) return e
    if (url === '/api/users') return [200, { items: [{ ...admin, email_mixed_script: false }, bob] }]
    if (url === '/api/nodes') return [503, { error: { code: 'unavailable', message: 'this server runs its sandboxes itself (role all): it has no sandbox nodes' } }]
    if (url === '/api/runs?status=active') return [200, { items: [] }]
    if (url === '/api/admin/budgets') return [200, { items: [] }]
    if (url.startsWith('/api/usage?group_by=')) return [200, usage('agent', [])]
    if (url === '/api/agents') return [200, { items: [] }]
    return undefined
  })
}

function page(user: User = admin) {
  return render(
    <SessionContext.Provider value={{ user, setUser: () => {} }}>
      <AdminPage />
    </SessionContext.Provider>,
  )
}

beforeEach(() => window.history.replaceState(null, '', '/admin'))
afterEach(() => vi.unstubAllGlobals())

describe('AdminPage', () => {
  it('is only for administrators', async () => {
    const calls = routes()
    page({ ...admin, admin: false })
    expect(await screen.findByText('Only an administrator sees this page.')).toBeTruthy()
    expect(calls).toEqual([])
  })

  it('disables an account and shows it, never offers to disable yourself', async () => {
    const calls = routes((method, url) => (method === 'POST' && url === '/api/users/usr_bob/disable' ? [200, { user: { ...bob, disabled: true } }] : undefined))
    page()
    const people = await screen.findByRole('table', { name: 'Accounts' })
    const rows = within(people).getAllByRole('row').slice(1)
    expect(within(rows[0]).getByText('you')).toBeTruthy()
    expect(within(rows[0]).queryByRole('button')).toBeNull()
    fireEvent.click(within(rows[1]).getByRole('button', { name: 'Disable Bob' }))
    await waitFor(() => expect(within(rows[1]).getByText('disabled')).toBeTruthy())
    expect(within(rows[1]).getByRole('button', { name: 'Enable Bob' })).toBeTruthy()
    expect(calls.some((c) => c.method === 'POST' && c.url === '/api/users/usr_bob/disable')).toBe(true)
  })

  it('makes an invite link a person signs up with', async () => {
    routes((method, url) => (method === 'POST' && url === '/api/invites' ? [201, { id: 'inv_1', token: 'tok-123', expires_at: '2026-12-10T00:00:00Z' }] : undefined))
    page()
    fireEvent.click(await screen.findByRole('button', { name: 'Invite someone' }))
    expect((await screen.findByText(/\/signup\?invite=tok-123$/)).textContent).toBe(`${window.location.origin}/signup?invite=tok-123`)
  })

  it('says a server of role all has no nodes, and drains a node of control', async () => {
    routes()
    const { unmount } = page()
    expect(await screen.findByText('This server runs its sandboxes itself: it has no sandbox nodes.')).toBeTruthy()
    unmount()
    let status = 'ready'
    const calls = routes((method, url) => {
      if (url === '/api/nodes') return [200, { items: [{ id: 'nod_1', name: 'node-1', status, runs: 2, max_sessions: 8, last_seen: '2026-12-03T10:00:00Z', refused_connections: 0, last_refused_at: null }] }]
      if (method === 'POST' && url === '/api/nodes/nod_1/drain') {
        status = 'draining'
        return [204]
      }
      return undefined
    })
    page()
    const nodes = await screen.findByRole('table', { name: 'Sandbox nodes' })
    expect(within(nodes).getByText('2 of 8')).toBeTruthy()
    fireEvent.click(within(nodes).getByRole('button', { name: 'Drain node-1' }))
    expect(await within(nodes).findByRole('button', { name: 'Undrain node-1' })).toBeTruthy()
    expect(calls.filter((c) => c.method === 'POST').map((c) => c.url)).toEqual(['/api/nodes/nod_1/drain'])
  })

  it('moves any agent, whoever owns it, to a ready node', async () => {
    const calls = routes((method, url) => {
      if (url === '/api/nodes') return [200, { items: [{ id: 'nod_2', name: 'node-2', status: 'ready', runs: 0, max_sessions: 0, last_seen: null, refused_connections: 0, last_refused_at: null }] }]
      if (url === '/api/admin/budgets') return [200, { items: [{ agent_id: 'agt_bob', agent_name: 'bobs-agent', owner: { id: 'usr_bob', name: 'Bob' }, budget: { tokens: 0, used: 0, reserved: 0, left: null }, open_reservations: 0 }] }]
      if (method === 'POST' && url === '/api/nodes/nod_2/agents') return [204]
      return undefined
    })
    page()
    const select = await screen.findByLabelText('Agent to move to node-2')
    await waitFor(() => expect(within(select).getByRole('option', { name: 'bobs-agent (Bob)' })).toBeTruthy())
    fireEvent.change(select, { target: { value: 'agt_bob' } })
    fireEvent.click(screen.getByRole('button', { name: 'Move here' }))
    expect(await screen.findByText('Moved bobs-agent.')).toBeTruthy()
    expect(calls.find((c) => c.method === 'POST')?.body).toEqual({ agent_id: 'agt_bob' })
  })

  it('lists the runs in flight and kills one', async () => {
    let runs = [{
      id: 'run_1', agent_id: 'agt_1', agent_name: 'helper', owner: { id: 'usr_bob', name: 'Bob' }, status: 'running',
      triggered_by: { id: 'usr_bob', name: 'Bob' }, parent_run_id: null, root_run_id: 'run_1', depth: 0, message_id: 'msg_1',
      driver: 'builtin', change_set_id: null, tokens: { input: 1200, output: 34 }, violation: null, reason: '',
      created_at: new Date().toISOString(), started_at: new Date().toISOString(), ended_at: null,
    }]
    const calls = routes((method, url) => {
      if (url === '/api/runs?status=active') return [200, { items: runs }]
      if (method === 'POST' && url === '/api/runs/run_1/kill') {
        runs = []
        return [200, {}]
      }
      return undefined
    })
    page()
    const table = await screen.findByRole('table', { name: 'Runs in flight' })
    const cells = [...within(table).getAllByRole('row')[1].querySelectorAll('th, td')].map((c) => c.textContent)
    expect(cells.slice(0, 4)).toEqual(['helper', 'Bob', 'Bob', 'running'])
    expect(cells[5]).toBe('1,234')
    fireEvent.click(within(table).getByRole('button', { name: 'Kill the run of helper' }))
    expect(await screen.findByText('No run is in flight.')).toBeTruthy()
    expect(calls.some((c) => c.method === 'POST' && c.url === '/api/runs/run_1/kill')).toBe(true)
  })

  it('shows every budget with what calls in flight hold', async () => {
    routes((_, url) =>
      url === '/api/admin/budgets'
        ? [200, { items: [
            { agent_id: 'agt_1', agent_name: 'helper', owner: { id: 'usr_bob', name: 'Bob' }, budget: { tokens: 10000, used: 4000, reserved: 1500, left: 4500 }, open_reservations: 2 },
            { agent_id: 'agt_2', agent_name: 'free', owner: { id: 'usr_bob', name: 'Bob' }, budget: { tokens: 0, used: 7, reserved: 0, left: null }, open_reservations: 0 },
          ] }]
        : undefined,
    )
    page()
    const table = await screen.findByRole('table', { name: 'Budgets' })
    const rows = within(table).getAllByRole('row').slice(1).map((r) => [...r.querySelectorAll('th, td')].map((c) => c.textContent))
    expect(rows).toEqual([
      ['helper', 'Bob', '10,000', '4,000', '1,500', '4,500', '2'],
      ['free', 'Bob', 'unlimited', '7', '0', '—', '0'],
    ])
  })

  it('charts usage by agent and asks again by person', async () => {
    const calls = routes((_, url) => {
      if (url.startsWith('/api/usage?group_by=agent')) return [200, usage('agent', [['helper', 900], ['docs', 100]])]
      if (url.startsWith('/api/usage?group_by=user')) return [200, usage('user', [['Bob', 1000]])]
      return undefined
    })
    page()
    const byAgent = await screen.findByRole('table', { name: 'Tokens by agent, last 30 days' })
    expect(within(byAgent).getAllByRole('row').slice(1).map((r) => r.textContent)).toEqual([' helper900', ' docs100'])
    expect(screen.getByRole('img', { name: 'Tokens per day over the last 30 days' })).toBeTruthy()
    fireEvent.click(screen.getByRole('button', { name: 'By person' }))
    const byPerson = await screen.findByRole('table', { name: 'Tokens by person, last 30 days' })
    expect(within(byPerson).getAllByRole('row').slice(1).map((r) => r.textContent)).toEqual([' Bob1,000'])
    expect(calls.find((c) => c.url.startsWith('/api/usage?group_by=user'))?.url).toBe(`/api/usage?group_by=user&since=${lastDays(30)[0]}`)
  })
})

describe('series', () => {
  it('keeps the five largest groups and sums the rest, day by day', () => {
    const u = usage('model', [['a', 60], ['b', 50], ['c', 40], ['d', 30], ['e', 20], ['f', 10], ['g', 5]])
    const days = lastDays(3)
    const s = series(u, days)
    expect(s.map((x) => [x.label, x.total])).toEqual([['a', 60], ['b', 50], ['c', 40], ['d', 30], ['e', 20], ['all others', 15]])
    expect(s[5].perDay).toEqual([0, 0, 15])
  })

  it('leaves out days outside the span', () => {
    const u = usage('agent', [['a', 5]])
    u.groups[0].days[0].day = '2000-01-01'
    expect(series(u, lastDays(3))[0].perDay).toEqual([0, 0, 0])
  })
})

describe('the header and signup', () => {
  it('links the admin page for an administrator only', async () => {
    serveRoutes((_, url) => {
      if (url === '/api/me') return [200, { user: { ...admin, admin: false } }]
      if (url === '/api/changes?status=pending') return [200, { items: [] }]
      if (url === '/api/agents') return [200, { items: [] }]
      return undefined
    })
    window.history.replaceState(null, '', '/')
    render(<App />)
    const nav = await screen.findByRole('navigation', { name: 'Main' })
    expect(within(nav).getAllByRole('link').map((l) => l.getAttribute('href'))).toEqual(['/', '/library', '/inbox'])
  })

  it('signs up with the invite the link carries', async () => {
    const calls = serveRoutes((method, url) => {
      if (url === '/api/me') return [401, { error: { code: 'unauthenticated', message: 'sign in' } }]
      if (url === '/api/setup') return [200, { first_run: false, signup: 'invite' }]
      if (method === 'POST' && url === '/api/auth/signup') return [201, { user: { ...bob } }]
      if (url === '/api/changes?status=pending') return [200, { items: [] }]
      if (url === '/api/agents') return [200, { items: [] }]
      return undefined
    })
    window.history.replaceState(null, '', '/signup?invite=tok-123')
    render(<App />)
    fireEvent.change(await screen.findByLabelText('Email'), { target: { value: 'bob@example.com' } })
    fireEvent.change(screen.getByLabelText('Name'), { target: { value: 'Bob' } })
    fireEvent.change(screen.getByLabelText(/^Password/), { target: { value: 'a long password' } })
    fireEvent.click(screen.getByRole('button', { name: 'Sign up' }))
    await waitFor(() => expect(calls.find((c) => c.url === '/api/auth/signup')?.body).toEqual({ email: 'bob@example.com', name: 'Bob', password: 'a long password', invite: 'tok-123' }))
  })
})
