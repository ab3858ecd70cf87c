import Synchronization

/// State that lives inside a `Mutex` and is reached only through `withLock`, for state that
/// non-Sendable values pass through while the lock is held: a caller's packet buffer written to a
/// socket or file, a frame handed to an encoder. `Mutex.withLock` takes its value as `inout
/// sending`, which region checking closes to such values; this box lets the closure use them for
/// the duration of the call. The rule that makes it sound is the caller's: nothing the closure
/// stores in the value may alias a non-Sendable value the caller keeps (copy it in, or keep only
/// what the call needs), and what it returns must not alias the value.
///
/// `Sendable` only when `Value` is; a box of non-Sendable state is shared only by a type that says
/// why that is safe (its own `@unchecked Sendable` and thread rule).
/// Thread rule: `withLock` from any thread; not recursive (a nested `withLock` on the same box
/// deadlocks). Cost: one `Mutex` (no allocation beyond the box itself); an uncontended
/// `withLock` is two atomic operations, no system call.
package final class Locked<Value> {
    private let mutex: Mutex<Value>

    /// A box holding `value` (by the type's rule, the caller keeps no alias of it that another
    /// thread uses).
    package init(_ value: consuming Value) {
        // Safe: by the type's rule, the value is reached only through the lock from now on.
        nonisolated(unsafe) let value = value
        mutex = Mutex(value)
    }

    /// Runs `body` with the value, the lock held, and returns its result.
    @inline(__always)
    package func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        try withoutActuallyEscaping(body) { (body) throws(E) -> Result in
            // Safe: `body` runs only here, under the lock, and does not outlive this call.
            nonisolated(unsafe) let body = body
            return try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
                // Safe: by the type's rule, the result does not alias the value.
                nonisolated(unsafe) let result = try body(&value)
                return result
            }
        }
    }
}

extension Locked: @unchecked Sendable where Value: Sendable {}
