package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"corral"
)

// TestListModels: the provider's list is asked with the key, and comes back
// sorted, without duplicates or unprintable names; a refusal or a list that
// cannot be read is EUNAVAIL and never carries the key.
func TestListModels(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		answer  string
		want    []string
		wantErr string // the error's message; "" for none
	}{
		{"a list", 200, `{"object":"list","data":[{"id":"zeta"},{"id":"alpha"},{"id":"zeta"},{"id":""},{"id":"bad\nname"},{"id":" padded"},{"id":"mid-size"}]}`,
			[]string{"alpha", "mid-size", "zeta"}, ""},
		{"an empty list", 200, `{"object":"list","data":[]}`, []string{}, ""},
		{"a refusal naming the key", 401, `{"error":{"message":"Incorrect API key provided: ` + testKey + `."}}`, nil,
			"the model provider did not list its models"},
		{"no list", 404, `404 page not found`, nil, "the model provider did not list its models"},
		{"not JSON", 200, `<html>` + testKey, nil, "the model provider's list of models could not be read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var auth, method, path string
			p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				auth, method, path = r.Header.Get("Authorization"), r.Method, r.URL.Path
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.answer)
			}))
			defer p.Close()
			g, err := New(Config{BaseURL: p.URL + "/v1", APIKey: testKey, Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			got, err := g.ListModels(context.Background())
			if method != http.MethodGet || path != "/v1/models" || auth != "Bearer "+testKey {
				t.Fatalf("the provider was asked %s %s with Authorization %q", method, path, auth)
			}
			if tt.wantErr == "" {
				if err != nil || !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("ListModels = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if corral.ErrorCode(err) != corral.EUNAVAIL || corral.ErrorMessage(err) != tt.wantErr {
				t.Fatalf("ListModels error = %v (%s), want %s: %q", err, corral.ErrorCode(err), corral.EUNAVAIL, tt.wantErr)
			}
			if strings.Contains(fmt.Sprintf("%+v %s", err, err), testKey) {
				t.Fatalf("the error %v holds the key", err)
			}
		})
	}
}

// TestListModelsUnconfigured: without a provider, nothing is asked.
func TestListModelsUnconfigured(t *testing.T) {
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.ListModels(context.Background()); corral.ErrorCode(err) != corral.EUNAVAIL {
		t.Fatalf("ListModels without a provider = %v, want %s", err, corral.EUNAVAIL)
	}
}
