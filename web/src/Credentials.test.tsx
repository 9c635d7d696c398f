// The credentials page lists name, host and username (never a secret),
// takes the secret in a password field and forgets it once sent — whether
// the server took it or refused it — and deletes only after a confirm.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen, waitFor, within } from '@testing-library/react'
import { CredentialsPage } from './pages/Credentials'
import { serveRoutes } from './testkit'
import type { Credential } from './types'

const secret = 'ghp_s3cr3t-token-value-never-shown'
const existing: Credential = {
  id: 'crd_1',
  name: 'work',
  host: 'git.example.com',
  username: 'alice',
  repositories: ['git.example.com/team/app'],
  created_at: '2025-01-01T00:00:00Z',
}

afterEach(() => vi.unstubAllGlobals())

function fill() {
  fireEvent.change(screen.getByLabelText('Name'), { target: { value: 'home' } })
  fireEvent.change(screen.getByLabelText('Host'), { target: { value: 'code.example.org' } })
  fireEvent.change(screen.getByLabelText('Username'), { target: { value: 'alice2' } })
  fireEvent.change(screen.getByLabelText('Secret'), { target: { value: secret } })
  fireEvent.change(screen.getByLabelText('Repositories'), { target: { value: 'code.example.org/me/app\n\n  code.example.org/lib/*  \n' } })
}

describe('CredentialsPage', () => {
  it('lists credentials without any secret', async () => {
    serveRoutes((_, url) => (url === '/api/credentials' ? [200, { items: [existing] }] : undefined))
    render(<CredentialsPage />)
    const table = await screen.findByRole('table', { name: 'Your credentials' })
    const row = within(table).getByRole('row', { name: /work/ })
    expect(within(row).getByText('git.example.com')).toBeTruthy()
    expect(within(row).getByText('alice')).toBeTruthy()
    expect(within(row).getByText('git.example.com/team/app')).toBeTruthy()
    expect(within(table).queryByText(/secret/i)).toBeNull()
  })

  it('takes the secret in a password field, sends it once, and never shows it again', async () => {
    const created: Credential = {
      id: 'crd_2',
      name: 'home',
      host: 'code.example.org',
      username: 'alice2',
      repositories: ['code.example.org/me/app', 'code.example.org/lib/*'],
      created_at: '2025-01-02T00:00:00Z',
    }
    let list = [existing]
    const calls = serveRoutes((method, url) => {
      if (method === 'GET' && url === '/api/credentials') return [200, { items: list }]
      if (method === 'POST' && url === '/api/credentials') {
        list = [existing, created]
        return [201, created]
      }
      return undefined
    })
    const { container } = render(<CredentialsPage />)
    await screen.findByRole('table', { name: 'Your credentials' })
    const field = screen.getByLabelText('Secret') as HTMLInputElement
    expect(field.type).toBe('password')
    fill()
    fireEvent.click(screen.getByRole('button', { name: 'Add credential' }))
    await screen.findByText('Added home. Its secret is stored and will not be shown again.')
    await screen.findByRole('row', { name: /home/ })
    expect(calls.find((c) => c.method === 'POST')?.body).toEqual({
      name: 'home',
      host: 'code.example.org',
      username: 'alice2',
      secret,
      repositories: ['code.example.org/me/app', 'code.example.org/lib/*'],
    })
    expect((screen.getByLabelText('Secret') as HTMLInputElement).value).toBe('')
    expect(container.innerHTML).not.toContain(secret)
    for (const input of Array.from(container.querySelectorAll('input'))) expect(input.value).not.toContain(secret)
  })

  it('forgets the secret when the server refuses it, and says why in its words', async () => {
    const words = 'A credential named home already exists.'
    serveRoutes((method, url) => {
      if (method === 'GET' && url === '/api/credentials') return [200, { items: [existing] }]
      if (method === 'POST') return [409, { error: { code: 'conflict', message: words } }]
      return undefined
    })
    const { container } = render(<CredentialsPage />)
    await screen.findByRole('table', { name: 'Your credentials' })
    fill()
    fireEvent.click(screen.getByRole('button', { name: 'Add credential' }))
    expect((await screen.findByRole('alert')).textContent).toBe(words)
    expect(container.innerHTML).not.toContain(secret)
    expect((screen.getByLabelText('Secret') as HTMLInputElement).value).toBe('')
    // The rest is kept to correct and send again.
    expect((screen.getByLabelText('Name') as HTMLInputElement).value).toBe('home')
  })

  it('replaces the repositories a credential may be used for', async () => {
    let list = [existing]
    const calls = serveRoutes((method, url, body) => {
      if (method === 'GET' && url === '/api/credentials') return [200, { items: list }]
      if (method === 'PATCH' && url === '/api/credentials/crd_1') {
        list = [{ ...existing, repositories: (body as { repositories: string[] }).repositories }]
        return [200, list[0]]
      }
      return undefined
    })
    render(<CredentialsPage />)
    fireEvent.click(await screen.findByRole('button', { name: 'Edit repositories of work' }))
    fireEvent.change(screen.getByLabelText('Repositories of work'), { target: { value: 'git.example.com/team/*\n' } })
    fireEvent.click(screen.getByRole('button', { name: 'Save' }))
    await screen.findByText('git.example.com/team/*')
    expect(calls.find((c) => c.method === 'PATCH')?.body).toEqual({ repositories: ['git.example.com/team/*'] })
  })

  it('deletes a credential only after the confirm', async () => {
    let list = [existing]
    const calls = serveRoutes((method, url) => {
      if (method === 'GET' && url === '/api/credentials') return [200, { items: list }]
      if (method === 'DELETE' && url === '/api/credentials/crd_1') {
        list = []
        return [204]
      }
      return undefined
    })
    render(<CredentialsPage />)
    fireEvent.click(await screen.findByRole('button', { name: 'Delete credential work' }))
    expect(calls.some((c) => c.method === 'DELETE')).toBe(false)
    fireEvent.click(within(screen.getByRole('group', { name: 'Confirm deleting credential work' })).getByRole('button', { name: 'Yes, delete' }))
    await screen.findByText('No credentials yet.')
    await waitFor(() => expect(calls.filter((c) => c.method === 'DELETE').length).toBe(1))
  })
})
