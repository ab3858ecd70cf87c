/// A list of delegates held by weak reference: whoever adds a delegate
/// keeps it alive. Main actor; adding or removing is O(n).
@MainActor
public final class DelegateList<Delegate> {
    private struct Entry {
        weak var object: AnyObject?
    }

    private var entries: [Entry] = []

    nonisolated init() {}

    /// Adds a delegate (once; adding the same object again does nothing). The list does not keep
    /// it alive.
    public func add(delegate: Delegate) {
        let object = delegate as AnyObject
        entries.removeAll { $0.object == nil }
        if entries.contains(where: { $0.object === object }) { return }
        entries.append(Entry(object: object))
    }

    /// Removes a delegate; does nothing when it is not in the list.
    public func remove(delegate: Delegate) {
        let object = delegate as AnyObject
        entries.removeAll { $0.object == nil || $0.object === object }
    }

    /// Removes every delegate (what `Revue.destroy()` does).
    public func removeAll() { entries.removeAll() }

    /// The delegates still alive, in the order they were added.
    public var all: [Delegate] { entries.compactMap { $0.object as? Delegate } }

    /// How many delegates are still alive.
    public var count: Int { all.count }
}
