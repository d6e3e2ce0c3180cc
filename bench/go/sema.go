// This file reaches the runtime semaphore that package sync uses (runtime/sema.go's
// semacquire/semrelease) by pulling the symbols sync.runtime_Semacquire and
// sync.runtime_Semrelease with //go:linkname. The declarations have no body; the empty
// empty.s file in this directory makes the compiler accept that (it then does not
// pass -complete).
package main

import (
	_ "unsafe" // for go:linkname
)

// semacquire waits until *s > 0 and decrements it (the runtime's semacquire).
//
//go:linkname semacquire sync.runtime_Semacquire
func semacquire(s *uint32)

// semrelease increments *s and wakes a waiter if any (the runtime's semrelease1).
//
//go:linkname semrelease sync.runtime_Semrelease
func semrelease(s *uint32, handoff bool, skipframes int)
