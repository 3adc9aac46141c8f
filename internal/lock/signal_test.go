package lock

import (
	"errors"
	"testing"

	"seckill/internal/testwait"
)

func TestSignalKeepsFirstReason(t *testing.T) {
	s := NewSignal()
	if s.Err() != nil {
		t.Fatalf("Err of an open Signal = %v, want nil", s.Err())
	}
	select {
	case <-s.Done():
		t.Fatal("Done closed before Close")
	default:
	}
	first, second := errors.New("first"), errors.New("second")
	if !s.Close(first) {
		t.Fatal("first Close reported false")
	}
	if s.Close(second) {
		t.Fatal("second Close reported true")
	}
	<-s.Done()
	if !errors.Is(s.Err(), first) || errors.Is(s.Err(), second) {
		t.Fatalf("Err = %v, want the first reason", s.Err())
	}
}

func TestSignalAfterFunc(t *testing.T) {
	s := NewSignal()
	ran := make(chan struct{})
	s.AfterFunc(func() { close(ran) })
	stopped := NewSignal()
	stop := stopped.AfterFunc(func() { t.Error("a stopped AfterFunc ran") })
	if !stop() {
		t.Fatal("stop before Close reported false")
	}
	select {
	case <-ran:
		t.Fatal("AfterFunc ran before Close")
	default:
	}
	s.Close(ErrLost)
	stopped.Close(ErrLost)
	select {
	case <-ran:
	case <-testwait.Until(t).Done():
		t.Fatal("AfterFunc did not run after Close")
	}
	late := make(chan struct{})
	s.AfterFunc(func() { close(late) }) // on a closed Signal: runs at once
	select {
	case <-late:
	case <-testwait.Until(t).Done():
		t.Fatal("AfterFunc on a closed Signal did not run")
	}
}
