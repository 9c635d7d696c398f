// An agent's secrets on its settings: listed by name, host and header
// (never a value); the value typed in a password field, sent once and
// forgotten — whether the server took it or refused it; deleted only after
// the confirm; a viewer reads the list and can change nothing.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen, waitFor, within } from '@testing-library/react'
import type { AgentSecret } from './egress'
import { SecretsSection } from './Secrets'
import { agentAt, serveRoutes } from './testkit'

afterEach(() => vi.unstubAllGlobals())

const value = 'Bearer npm_t0ken-never-shown-again'
const existing: AgentSecret = {
  id: 'sec_1',
  name: 'npm token',
  host: 'npm.example.com',
  header: 'Authorization',
  created_at: '2025-01-01T00:00:00Z',
}

function fill() {
  const form = within(screen.getByRole('form', { name: 'Add a secret' }))
  fireEvent.change(form.getByLabelText('Name'), { target: { value: 'pypi token' } })
  fireEvent.change(form.getByLabelText('Host'), { target: { value: 'pypi.example.com' } })
  fireEvent.change(form.getByLabelText('Value'), { target: { value } })
}

describe('SecretsSection, for an editor', () => {
  it('lists name, host and header, never a value', async () => {
    // Even an answer that (wrongly) held one: only the listed fields are shown.
    serveRoutes((_, url) => (url === '/api/agents/agt_1/secrets' ? [200, { items: [{ ...existing, value }] }] : undefined))
    const { container } = render(<SecretsSection agent={agentAt('editor')} />)
    const table = await screen.findByRole('table', { name: 'Secrets' })
    expect(container.innerHTML).not.toContain('npm_t0ken')
    const row = within(table).getByRole('row', { name: /npm token/ })
    expect(within(row).getByText('npm.example.com')).toBeTruthy()
    expect(within(row).getByText('Authorization')).toBeTruthy()
    expect(within(table).getAllByRole('columnheader').map((h) => h.textContent)).toEqual(['Name', 'Host', 'Header', 'Added', 'Actions'])
  })

  it('takes the value in a password field, posts it once, and forgets it', async () => {
    const created: AgentSecret = { id: 'sec_2', name: 'pypi token', host: 'pypi.example.com', header: 'Authorization', created_at: '2025-01-02T00:00:00Z' }
    let list = [existing]
    const calls = serveRoutes((method, url) => {
      if (url !== '/api/agents/agt_1/secrets') return undefined
      if (method === 'GET') return [200, { items: list }]
      if (method === 'POST') {
        list = [existing, created]
        return [201, created]
      }
      return undefined
    })
    const { container } = render(<SecretsSection agent={agentAt('editor')} />)
    await screen.findByRole('table', { name: 'Secrets' })
    const field = screen.getByLabelText('Value') as HTMLInputElement
    expect(field.type).toBe('password')
    expect((screen.getByLabelText('Header') as HTMLInputElement).value).toBe('Authorization')
    fill()
    fireEvent.click(screen.getByRole('button', { name: 'Add secret' }))
    await screen.findByText('Added pypi token. Its value is stored and will not be shown again.')
    await screen.findByRole('row', { name: /pypi token/ })
    expect(calls.filter((c) => c.method === 'POST').map((c) => c.body)).toEqual([
      { name: 'pypi token', host: 'pypi.example.com', header: 'Authorization', value },
    ])
    expect((screen.getByLabelText('Value') as HTMLInputElement).value).toBe('')
    expect(container.innerHTML).not.toContain(value)
    for (const input of Array.from(container.querySelectorAll('input'))) expect(input.value).not.toContain('npm_t0ken')
  })

  it('forgets the value when the server refuses it, and says why in its words', async () => {
    const words = 'The host pypi.example.com is not on the agent’s allow-list.'
    serveRoutes((method, url) => {
      if (url !== '/api/agents/agt_1/secrets') return undefined
      if (method === 'GET') return [200, { items: [] }]
      return [400, { error: { code: 'invalid_input', message: words } }]
    })
    const { container } = render(<SecretsSection agent={agentAt('editor')} />)
    await screen.findByText('No secrets.')
    fill()
    fireEvent.click(screen.getByRole('button', { name: 'Add secret' }))
    expect((await screen.findByRole('alert')).textContent).toBe(words)
    expect((screen.getByLabelText('Value') as HTMLInputElement).value).toBe('')
    expect(container.innerHTML).not.toContain(value)
    // The rest is kept to correct and send again.
    expect((screen.getByLabelText('Host') as HTMLInputElement).value).toBe('pypi.example.com')
  })

  it('deletes a secret only after the confirm', async () => {
    let list = [existing]
    const calls = serveRoutes((method, url) => {
      if (method === 'GET' && url === '/api/agents/agt_1/secrets') return [200, { items: list }]
      if (method === 'DELETE' && url === '/api/agents/agt_1/secrets/sec_1') {
        list = []
        return [204]
      }
      return undefined
    })
    render(<SecretsSection agent={agentAt('owner')} />)
    fireEvent.click(await screen.findByRole('button', { name: 'Delete secret npm token' }))
    expect(calls.some((c) => c.method === 'DELETE')).toBe(false)
    fireEvent.click(within(screen.getByRole('group', { name: 'Confirm deleting secret npm token' })).getByRole('button', { name: 'Yes, delete' }))
    await screen.findByText('No secrets.')
    await waitFor(() => expect(calls.filter((c) => c.method === 'DELETE').length).toBe(1))
  })
})

describe('SecretsSection, read-only', () => {
  it('shows a viewer the list, with no form and no delete', async () => {
    serveRoutes((_, url) => (url === '/api/agents/agt_1/secrets' ? [200, { items: [existing] }] : undefined))
    render(<SecretsSection agent={agentAt('viewer')} />)
    await screen.findByRole('row', { name: /npm token/ })
    expect(screen.queryByRole('form', { name: 'Add a secret' })).toBeNull()
    expect(screen.queryByLabelText('Value')).toBeNull()
    expect(screen.queryByRole('button', { name: /Delete/ })).toBeNull()
  })
})
