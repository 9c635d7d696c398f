// Unmounts what each test rendered (Vitest runs without globals, so
// Testing Library cannot register this itself).
import { afterEach } from 'vitest'
import { cleanup } from '@testing-library/react'

afterEach(() => cleanup())
