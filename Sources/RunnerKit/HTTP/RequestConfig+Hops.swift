import Foundation

extension RequestConfig {
    /// The headers of one hop of `request` (the request itself, or a redirect): the request's
    /// own, the config's for the hop's host, and the request's origin-bound ones if the hop is
    /// on the request's origin; a later header replaces an earlier one of the same name.
    /// - Throws: `FetchError.other` naming the header and the variable or file that would not expand.
    public func headers(
        of request: FetchRequest, hop: URL, settings: HostSettings?
    ) throws(FetchError) -> [(name: String, value: String)] {
        let sameOrigin = request.originHeaders.isEmpty ? false : hop == request.url || Origin(hop) == Origin(request.url)
        if (settings?.headers.isEmpty ?? true) && !sameOrigin { return request.headers }
        var headers = request.headers
        do {
            for header in settings?.headers ?? [] { headers.setHeader(header.name, try header.expand()) }
        } catch {
            throw FetchError.other("the config's headers for \(hop.host ?? "the host"): \(error)")
        }
        if sameOrigin {
            for header in request.originHeaders { headers.setHeader(header.name, header.value) }
        }
        return headers
    }
}
