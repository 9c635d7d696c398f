// Command openapigen writes the API's OpenAPI document, generated from
// package api (its route table, views and contract tables), to a file:
// `go generate ./internal/api` or `make openapi`.
package main

import (
	"flag"
	"fmt"
	"os"

	"corral/internal/api"
)

func main() {
	out := flag.String("o", "openapi.json", "the file to write")
	flag.Parse()
	doc, err := api.OpenAPI()
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapigen:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "openapigen:", err)
		os.Exit(1)
	}
}
