//! Which of a drawn page's resources failed, and why: what the page says of each (loaded, broken,
//! still loading) joined with how the proxy saw its fetch end.

use std::time::Instant;

use domain::{FailedResource, FetchFailure, ResourceKind};
use webkit::protocol::{PageResource, ResourceState};

use crate::proxy::{Fetched, Proxy};

/// The resources of `page` that did not load, with the proxy's reason where it has one; fetches
/// it saw before `since` (the render's start) are not this render's. With images blocked (an
/// images-off variant) missing images are the point, and only stylesheets are reported.
pub(crate) fn failed_resources(
    proxy: &Proxy,
    page: &[PageResource],
    since: Instant,
    block_images: bool,
) -> Vec<FailedResource> {
    page.iter()
        .filter(|r| !block_images || r.kind == ResourceKind::Stylesheet)
        .filter_map(|r| {
            let (reason, status) = judge(r.state, proxy.fetched(&r.url, since))?;
            Some(FailedResource::new(&r.url, r.kind, reason, status))
        })
        .take(domain::resources::MAX_FAILED_PER_SHOT)
        .collect()
}

/// Whether a resource failed, and why. The page's own word that it loaded wins (an image served
/// with a 404 status still draws); otherwise the proxy's record gives the reason, and the page's
/// state a coarser one when the proxy saw nothing telling (https, whose status it cannot see).
fn judge(state: ResourceState, fetched: Option<Fetched>) -> Option<(FetchFailure, Option<u16>)> {
    if state == ResourceState::Loaded {
        return None;
    }
    match (fetched, state) {
        (Some(Fetched::Failed(failure)), _) => Some((failure, None)),
        (Some(Fetched::Status(code)), _) if code >= 400 => {
            Some((FetchFailure::HttpStatus, Some(code)))
        }
        (Some(Fetched::Pending), _) | (_, ResourceState::Loading) => {
            Some((FetchFailure::Timeout, None))
        }
        (_, ResourceState::Broken) => Some((FetchFailure::NotLoaded, None)),
        // A background image's state is not visible to the page: without a failure on record it
        // is taken as drawn.
        (_, ResourceState::Unknown | ResourceState::Loaded) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_the_proxy_together_say_why() {
        use FetchFailure::*;
        use ResourceState::*;
        // Drawn is drawn, whatever the status.
        assert_eq!(judge(Loaded, Some(Fetched::Status(404))), None);
        assert_eq!(
            judge(Broken, Some(Fetched::Status(404))),
            Some((HttpStatus, Some(404)))
        );
        assert_eq!(
            judge(Broken, Some(Fetched::Failed(RefusedByPolicy))),
            Some((RefusedByPolicy, None))
        );
        assert_eq!(judge(Loading, None), Some((Timeout, None)));
        assert_eq!(judge(Broken, Some(Fetched::Pending)), Some((Timeout, None)));
        // Over https the proxy saw a tunnel only.
        assert_eq!(
            judge(Broken, Some(Fetched::Tunnelled)),
            Some((NotLoaded, None))
        );
        // A background image fails only on the proxy's record.
        assert_eq!(judge(Unknown, Some(Fetched::Status(200))), None);
        assert_eq!(judge(Unknown, None), None);
        assert_eq!(
            judge(Unknown, Some(Fetched::Failed(Dns))),
            Some((Dns, None))
        );
        assert_eq!(
            judge(Unknown, Some(Fetched::Status(500))),
            Some((HttpStatus, Some(500)))
        );
    }
}
