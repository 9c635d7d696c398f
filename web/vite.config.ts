// Vite builds the app into the Go side's embed directory; `go build -tags ui`
// then serves it at "/". Vitest reads the `test` section.
import { defineConfig } from 'vitest/config'
import react from '@vitejs/plugin-react'

export default defineConfig({
  plugins: [react()],
  build: {
    outDir: '../internal/webui/dist',
    emptyOutDir: true,
  },
  server: {
    // `npm run dev` next to a `corral serve` on its default address.
    proxy: { '/api': { target: 'http://127.0.0.1:8080', ws: true } },
  },
  test: {
    environment: 'jsdom',
    // .test.js: the few tests that use Node's modules, which the type check (no Node types) leaves out.
    include: ['src/**/*.test.{ts,tsx,js}'],
    setupFiles: ['src/test-setup.ts'],
  },
})
