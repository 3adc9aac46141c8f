// Command healthcheck is a container health probe for images without a shell.
//
// Usage: healthcheck [URL]
//
// It sends GET URL (default http://127.0.0.1:8080/readyz) with a 2s timeout
// and exits 0 on a 2xx response, 1 otherwise. It is built statically
// (CGO_ENABLED=0) and copied next to stockd in the runtime image.
package main

import (
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	url := "http://127.0.0.1:8080/readyz"
	if len(os.Args) > 1 {
		url = os.Args[1]
	}
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		os.Exit(1)
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		fmt.Fprintln(os.Stderr, "healthcheck:", url, resp.Status)
		os.Exit(1)
	}
}
