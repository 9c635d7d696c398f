import { render, screen } from '@testing-library/react'
import { describe, expect, it, vi } from 'vitest'
import { ErrorBoundary } from './ErrorBoundary'

function Broken(): never {
  throw new Error('the trace had no events')
}

describe('ErrorBoundary', () => {
  it('shows the error and a way back instead of a blank screen', () => {
    const quiet = vi.spyOn(console, 'error').mockImplementation(() => {})
    render(
      <ErrorBoundary>
        <Broken />
      </ErrorBoundary>,
    )
    quiet.mockRestore()
    expect(screen.getByRole('alert').textContent).toContain('the trace had no events')
    expect(screen.getByRole('link', { name: 'Back to your agents' }).getAttribute('href')).toBe('/')
  })

  it('renders its children when nothing throws', () => {
    render(
      <ErrorBoundary>
        <p>fine</p>
      </ErrorBoundary>,
    )
    expect(screen.getByText('fine')).toBeTruthy()
  })
})
