package loopback

import (
	"errors"
	"net"
	"testing"
)

var errTest = errors.New("test: refusing to listen beyond loopback")

var refusal = Refusal{Sentinel: errTest, Prefix: "test", Advice: "pass AllowRemote"}

func TestListenBindsLoopbackByDefault(t *testing.T) {
	for _, addr := range []string{"", ":0", "127.0.0.1:0", "localhost:0", "[::1]:0"} {
		ln, err := Listen(addr, false, refusal)
		if addr == "[::1]:0" && err != nil {
			continue // a machine without IPv6 loopback
		}
		if err != nil {
			t.Fatalf("Listen(%q): %v", addr, err)
		}
		a := ln.Addr()
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		if !IsAddr(a) {
			t.Fatalf("Listen(%q) bound %v, want loopback", addr, a)
		}
	}
}

func TestListenRefusesBeyondLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", "192.0.2.1:8080", "example.com:80"} {
		_, err := Listen(addr, false, refusal)
		if !errors.Is(err, errTest) {
			t.Fatalf("Listen(%q): %v, want the sentinel", addr, err)
		}
		var nl *NotLoopbackError
		if !errors.As(err, &nl) {
			t.Fatalf("Listen(%q): %T, want *NotLoopbackError", addr, err)
		}
		host, _, _ := net.SplitHostPort(addr)
		want := "test: refusing to listen beyond loopback\ntest: " + host +
			" is not a loopback address: bind 127.0.0.1, or pass AllowRemote"
		if nl.Host != host || err.Error() != want {
			t.Fatalf("Listen(%q): host %q, message %q; want %q, %q", addr, nl.Host, err.Error(), host, want)
		}
	}
	ln, err := Listen("0.0.0.0:0", true, refusal)
	if err != nil {
		t.Fatalf("allowed remote: %v", err)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestListenRefusesAMalformedAddress(t *testing.T) {
	_, err := Listen("127.0.0.1", false, refusal)
	var ae *net.AddrError
	if !errors.As(err, &ae) || errors.Is(err, errTest) {
		t.Fatalf("Listen without a port: %v, want net.SplitHostPort's *net.AddrError", err)
	}
}

func TestIsHostAndIsAddr(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "127.0.0.1": true, "127.8.9.10": true, "::1": true,
		"": false, "0.0.0.0": false, "::": false, "10.0.0.1": false, "localhost.example": false, "LOCALHOST": false,
	} {
		if got := IsHost(host); got != want {
			t.Errorf("IsHost(%q) = %v, want %v", host, got, want)
		}
	}
	for _, c := range []struct {
		a    net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, true},
		{&net.TCPAddr{IP: net.IPv6loopback}, true},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1)}, false},
		{&net.UnixAddr{Name: "/tmp/sock", Net: "unix"}, false},
	} {
		if got := IsAddr(c.a); got != c.want {
			t.Errorf("IsAddr(%v) = %v, want %v", c.a, got, c.want)
		}
	}
}
