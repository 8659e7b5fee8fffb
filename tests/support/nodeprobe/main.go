// nodeprobe: a tiny static test program for pods on the real test node (no shell, no
// registry image needed). Each argument is one check; it prints "OK <check> ..." or
// "FAIL <check> ..." and exits 1 if any check failed.
//
//	dns:NAME             NAME resolves through the pod's resolv.conf (cluster DNS)
//	nodns:NAME           NAME does NOT resolve (no upstream resolver is reachable)
//	api                  GET /version from the API server through the kubernetes Service
//	                     (KUBERNETES_SERVICE_HOST) and through its DNS name, with the
//	                     pod's ServiceAccount token and CA
//	write:PATH:TEXT      write TEXT to PATH
//	read:PATH:TEXT       PATH holds exactly TEXT
//	noconnect:HOST:PORT  a TCP connection to HOST:PORT fails within 3 s
//	connect:HOST:PORT    a TCP connection to HOST:PORT succeeds within 3 s
//	serve:PORT           listen on PORT and answer every connection with "probe\n" (forever)
//	ip                   print the pod's IPv4 addresses
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

const sa = "/var/run/secrets/kubernetes.io/serviceaccount"

func resolve(name string) ([]string, error) {
	r := &net.Resolver{PreferGo: true}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.LookupHost(ctx, name)
}

func apiVersion(base string) (string, error) {
	token, err := os.ReadFile(sa + "/token")
	if err != nil {
		return "", err
	}
	caPEM, err := os.ReadFile(sa + "/ca.crt")
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return "", fmt.Errorf("no CA in %s/ca.crt", sa)
	}
	client := &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool},
			DialContext:     (&net.Dialer{Resolver: &net.Resolver{PreferGo: true}}).DialContext,
		},
	}
	req, _ := http.NewRequest("GET", base+"/version", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return "", err
	}
	return v.GitVersion, nil
}

func serve(port string) error {
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return err
	}
	fmt.Printf("OK serve:%s listening\n", port)
	for {
		conn, err := ln.Accept()
		if err != nil {
			return err
		}
		go func(c net.Conn) {
			defer c.Close()
			c.Write([]byte("probe\n"))
		}(conn)
	}
}

func check(arg string) (string, error) {
	kind, rest, _ := strings.Cut(arg, ":")
	switch kind {
	case "dns":
		addrs, err := resolve(rest)
		if err != nil {
			return "", err
		}
		return strings.Join(addrs, ","), nil
	case "nodns":
		addrs, err := resolve(rest)
		if err == nil {
			return "", fmt.Errorf("resolved to %v", addrs)
		}
		return err.Error(), nil
	case "api":
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		byIP, err := apiVersion("https://" + net.JoinHostPort(host, port))
		if err != nil {
			return "", fmt.Errorf("via %s:%s: %w", host, port, err)
		}
		byName, err := apiVersion("https://kubernetes.default.svc.cluster.local")
		if err != nil {
			return "", fmt.Errorf("via kubernetes.default.svc.cluster.local: %w", err)
		}
		return fmt.Sprintf("%s:%s=%s dns=%s", host, port, byIP, byName), nil
	case "write":
		path, text, _ := strings.Cut(rest, ":")
		return path, os.WriteFile(path, []byte(text), 0o644)
	case "read":
		path, text, _ := strings.Cut(rest, ":")
		got, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		if string(got) != text {
			return "", fmt.Errorf("%s holds %q, not %q", path, got, text)
		}
		return path, nil
	case "connect", "noconnect":
		conn, err := net.DialTimeout("tcp", rest, 3*time.Second)
		if err == nil {
			conn.Close()
		}
		if (err == nil) != (kind == "connect") {
			return "", fmt.Errorf("connect %s: err=%v", rest, err)
		}
		return fmt.Sprintf("%s err=%v", rest, err), nil
	case "serve":
		return "", serve(rest)
	case "ip":
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return "", err
		}
		var out []string
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				out = append(out, n.IP.String())
			}
		}
		return strings.Join(out, ","), nil
	}
	return "", fmt.Errorf("unknown check %q", arg)
}

func main() {
	failed := false
	for _, arg := range os.Args[1:] {
		detail, err := check(arg)
		if err != nil {
			failed = true
			fmt.Printf("FAIL %s %v\n", arg, err)
		} else {
			fmt.Printf("OK %s %s\n", arg, detail)
		}
	}
	if failed {
		os.Exit(1)
	}
}
