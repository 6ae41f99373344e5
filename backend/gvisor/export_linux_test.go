package gvisor

// SetAfterBundle sets afterBundle for a test.
func SetAfterBundle(f func(stage string)) { afterBundle = f }
