import Synchronization

/// State guarded by a `Mutex` and reached only through `withLock`, for state that non-Sendable
/// values pass through while the lock is held: a caller's packet buffer written to a socket or
/// file, a frame handed to an encoder. `Mutex<State>.withLock` takes its value as `inout sending`,
/// which region checking closes to such values; this box lets the closure use them for the
/// duration of the call. The rule that makes it sound is the caller's: nothing the closure
/// stores in the value may alias a non-Sendable value the caller keeps (copy it in, or keep only
/// what the call needs), and what it returns must not alias the value.
///
/// `Sendable` only when `Value` is; a box of non-Sendable state is shared only by a type that says
/// why that is safe (its own `@unchecked Sendable` and thread rule).
/// Thread rule: `withLock` from any thread; not recursive (a nested `withLock` on the same box
/// deadlocks). Cost: one `Mutex` (no allocation beyond the box itself); an uncontended
/// `withLock` is two atomic operations, no system call.
@usableFromInline package final class Locked<Value> {
    /// Serialises every `withLock`; `value` is read and written only inside it. A `Mutex` of its
    /// own rather than `Mutex<Value>`: handing the closure the value through `Mutex.withLock`'s
    /// `inout sending` parameter needs an escaping copy of the closure, which allocates on every
    /// call, and the TURN client's ChannelData path must not.
    @usableFromInline let mutex = Mutex<Void>(())
    @usableFromInline var value: Value

    /// A box holding `value` (by the type's rule, the caller keeps no alias of it that another
    /// thread uses).
    package init(_ value: consuming Value) { self.value = value }

    /// Runs `body` with the value, the lock held, and returns its result. No allocation.
    /// Inlinable, so callers in other modules get code specialised for `Value` and `body`.
    @inlinable @inline(__always)
    package func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        try mutex.withLock { (_) throws(E) -> sending Result in
            // Safe: by the type's rule, the result does not alias the value.
            nonisolated(unsafe) let result = try body(&value)
            return result
        }
    }
}

extension Locked: @unchecked Sendable where Value: Sendable {}
