// SVG bar charts of ours against each anchor, written without any plotting dependency.
import Foundation

enum SVGChart {
    /// One chart per suite: for each case with an anchor, a bar for ours and one for the anchor,
    /// scaled to the larger of the two, with the ratio printed; a case without an anchor (a
    /// latency percentile, the memory suite's peak and growth of a call) gets one bar, scaled to the
    /// largest figure of the same metric and unit in the suite. Returns the file names written.
    static func write(records: [BenchRecord], to directory: String) throws -> [String] {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var written: [String] = []
        let suites = Dictionary(grouping: records, by: \.suite)
        for (suite, rows) in suites.sorted(by: { $0.key < $1.key }) {
            var top: [String: Double] = [:]  // by metric and unit
            for r in rows {
                top[r.metric + "|" + r.unit] = max(top[r.metric + "|" + r.unit] ?? 0, abs(r.ours), abs(r.anchor ?? 0))
            }
            let rowHeight = 46, width = 760, labelWidth = 300, barMax = 360
            let height = 40 + rows.count * rowHeight + 20
            var svg = """
                <svg xmlns="http://www.w3.org/2000/svg" width="\(width)" height="\(height)" font-family="sans-serif" font-size="12">
                <text x="10" y="20" font-size="15" font-weight="bold">\(escape(suite)): ours (blue) vs anchor (grey)</text>

                """
            for (i, r) in rows.enumerated() {
                let y = 36 + i * rowHeight
                guard let anchor = r.anchor else {
                    let wo = Int(Double(barMax) * max(0, r.ours) / max(top[r.metric + "|" + r.unit] ?? 0, 1e-12))
                    svg += """
                        <text x="10" y="\(y + 14)">\(escape(r.case)) — \(escape(r.metric)) (\(escape(r.unit)))</text>
                        <text x="10" y="\(y + 30)" fill="#555">no anchor</text>
                        <rect x="\(labelWidth)" y="\(y + 2)" width="\(wo)" height="16" fill="#2f6fde"/>
                        <text x="\(labelWidth + wo + 4)" y="\(y + 15)">\(String(format: "%.4g", r.ours))</text>

                        """
                    continue
                }
                let top = max(r.ours, anchor, 1e-12)
                let wo = Int(Double(barMax) * r.ours / top), wa = Int(Double(barMax) * anchor / top)
                let ratio = r.ratio.map { String(format: "%.2fx", $0) } ?? ""
                svg += """
                    <text x="10" y="\(y + 14)">\(escape(r.case)) — \(escape(r.metric)) (\(escape(r.unit)))</text>
                    <text x="10" y="\(y + 30)" fill="#555">vs \(escape(r.anchorName ?? "")): \(ratio)</text>
                    <rect x="\(labelWidth)" y="\(y + 2)" width="\(wo)" height="16" fill="#2f6fde"/>
                    <text x="\(labelWidth + wo + 4)" y="\(y + 15)">\(String(format: "%.4g", r.ours))</text>
                    <rect x="\(labelWidth)" y="\(y + 20)" width="\(wa)" height="16" fill="#999"/>
                    <text x="\(labelWidth + wa + 4)" y="\(y + 33)">\(String(format: "%.4g", anchor))</text>

                    """
            }
            svg += "</svg>\n"
            let name = "\(suite).svg"
            try svg.write(toFile: (directory as NSString).appendingPathComponent(name), atomically: true, encoding: .utf8)
            written.append(name)
        }
        return written
    }

    private static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(
            of: ">", with: "&gt;")
    }
}
