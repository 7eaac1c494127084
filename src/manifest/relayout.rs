//! (the control plane) A pod `hooklog inject` wired before issue 37, brought to the current layout. The hooks'
//! binary was `/hooklog/bin/hooklog` in the shared emptyDir (0777, no sticky bit), where any peer
//! could replace it; it is now on an emptyDir of its own that only the installer writes. `inject`
//! (and so the webhook) moves an injected pod it meets; `uninject` reads either layout.

use serde_json::{Value, json};

use super::layout::{
    BIN, BIN_DIR, BIN_MOUNT, BIN_VOLUME, INSTALLER, LEGACY_BIN, LEGACY_BIN_DIR, VOLUME, own_prefix,
};
use super::podspec;

/// What inject says on stderr of a pod it moved.
pub const NOTE: &str = "injected by an earlier version with the hooks' binary in the shared volume, which any container could replace: moved to the hooklog-bin volume, read-only in every container but hooklog-install";

/// Moves a pod of the old layout to the current one: the installer fills `bin_volume` (added
/// beside the shared one) at [`BIN_DIR`], and every hook inject wrapped calls [`BIN`] from it,
/// mounted `readOnly: true`. `Ok(false)` when the pod is in the current layout already; an error
/// when it is in neither (its installer edited since inject), or when a hook calls the old path
/// in a way inject did not write (`sh -c '... /hooklog/bin/hooklog sleep 5'`), which the move
/// would break: nothing is changed then.
pub fn upgrade(spec: &mut Value, bin_volume: Value) -> Result<bool, String> {
    let mut moved = spec.clone();
    if !move_binary(&mut moved, bin_volume)? {
        return Ok(false);
    }
    for key in ["initContainers", "containers"] {
        for c in moved[key].as_array().into_iter().flatten() {
            if c["lifecycle"].to_string().contains(LEGACY_CALL) {
                return Err(format!(
                    "injected by an earlier version, and container {} calls {LEGACY_BIN_DIR}/ in a hook itself: change it to {BIN_DIR}/, or run `hooklog uninject` and then inject, to move the hooks' binary to a volume no other container can write",
                    c["name"]
                ));
            }
        }
    }
    *spec = moved;
    Ok(true)
}

/// What a hook calling the old layout's binary has in its command.
const LEGACY_CALL: &str = "/hooklog/bin/";

/// [`upgrade`]'s change, on a copy.
fn move_binary(spec: &mut Value, bin_volume: Value) -> Result<bool, String> {
    let volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
    if volumes.iter().any(|v| v["name"] == BIN_VOLUME) {
        return Ok(false);
    }
    let Some(shared) = volumes.iter().position(|v| v["name"] == VOLUME) else {
        return Err(format!(
            "injected before, but its {VOLUME:?} volume is gone: run `hooklog uninject` first"
        ));
    };
    let installer = spec["initContainers"]
        .as_array_mut()
        .and_then(|l| l.iter_mut().find(|c| c["name"] == INSTALLER))
        .filter(|c| c["args"] == json!(["install", LEGACY_BIN_DIR]))
        .ok_or_else(|| {
            format!(
                "injected by an earlier version, and its {INSTALLER:?} no longer runs `install {LEGACY_BIN_DIR}` as it wrote it: run `hooklog uninject`, then inject, to move the hooks' binary to a volume no other container can write"
            )
        })?;
    installer["args"] = json!(["install", BIN_DIR]);
    for m in installer["volumeMounts"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        if m["name"] == VOLUME {
            *m = json!({"name": BIN_VOLUME, "mountPath": BIN_MOUNT});
        }
    }
    if let Some(list) = spec["volumes"].as_array_mut() {
        list.insert(shared + 1, bin_volume);
    }
    for key in ["initContainers", "containers"] {
        for c in spec[key].as_array_mut().into_iter().flatten() {
            if rewire(c) {
                mount_read_only(c);
            }
        }
    }
    Ok(true)
}

/// Points a hook inject wrapped in the old layout at [`BIN`], and the `hooklog sleep N` it wrote
/// for a bare `sleep N`; returns whether the container has such a hook.
fn rewire(c: &mut Value) -> bool {
    let Some(items) = c
        .pointer_mut("/lifecycle/preStop/exec/command")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let argv = podspec::strings(&Value::Array(items.clone()));
    let Some((len, _)) = own_prefix(&argv).filter(|_| argv[0] == LEGACY_BIN) else {
        return false;
    };
    items[0] = json!(BIN);
    if argv.len() == len + 3 && argv[len] == LEGACY_BIN && argv[len + 1] == "sleep" {
        items[len] = json!(BIN);
    }
    true
}

/// Mounts the binary's volume read-only, just after the shared volume's mount.
fn mount_read_only(c: &mut Value) {
    let Some(mounts) = c["volumeMounts"].as_array_mut() else {
        return;
    };
    if mounts.iter().any(|m| m["name"] == BIN_VOLUME) {
        return;
    }
    let at = mounts
        .iter()
        .position(|m| m["name"] == VOLUME)
        .map_or(mounts.len(), |i| i + 1);
    mounts.insert(
        at,
        json!({"name": BIN_VOLUME, "mountPath": BIN_MOUNT, "readOnly": true}),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legacy() -> Value {
        json!({
            "initContainers": [{"name": INSTALLER, "image": "h", "args": ["install", "/hooklog/bin"],
                "volumeMounts": [{"name": VOLUME, "mountPath": "/hooklog"}]}],
            "containers": [
                {"name": "envoy", "lifecycle": {"preStop": {"exec": {"command": [
                    LEGACY_BIN, "hook", "--container", "envoy", "--socket", "/hooklog/hooklog.sock",
                    "--file", "/hooklog/prestop.log", "--", LEGACY_BIN, "sleep", "15"]}}},
                 "volumeMounts": [{"name": "cfg", "mountPath": "/etc/envoy"}, {"name": VOLUME, "mountPath": "/hooklog"}]},
                {"name": "web", "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 1"]}}}},
            ],
            "volumes": [{"name": VOLUME, "emptyDir": {}}, {"name": "cfg", "emptyDir": {}}],
        })
    }

    #[test]
    fn an_old_layout_moves_and_the_new_one_stays() {
        let mut spec = legacy();
        assert_eq!(upgrade(&mut spec, json!({"name": BIN_VOLUME})), Ok(true));
        assert_eq!(
            spec["initContainers"][0]["args"],
            json!(["install", BIN_DIR])
        );
        assert_eq!(
            spec["initContainers"][0]["volumeMounts"],
            json!([{"name": BIN_VOLUME, "mountPath": BIN_MOUNT}])
        );
        let envoy = &spec["containers"][0];
        let cmd = &envoy["lifecycle"]["preStop"]["exec"]["command"];
        assert_eq!((&cmd[0], &cmd[9]), (&json!(BIN), &json!(BIN)));
        assert_eq!(envoy["volumeMounts"][2]["readOnly"], true);
        // Not a hook inject wrapped: left as the user wrote it.
        assert_eq!(spec["containers"][1], legacy()["containers"][1]);
        assert_eq!(spec["volumes"][1]["name"], BIN_VOLUME);
        let moved = spec.clone();
        assert_eq!(upgrade(&mut spec, json!({"name": BIN_VOLUME})), Ok(false));
        assert_eq!(spec, moved);
    }

    #[test]
    fn a_hook_calling_the_old_path_itself_is_an_error_and_nothing_changes() {
        let mut spec = legacy();
        spec["containers"][1]["lifecycle"]["preStop"]["exec"]["command"][2] =
            json!("/app/drain && /hooklog/bin/hooklog sleep 1");
        let before = spec.clone();
        let e = upgrade(&mut spec, json!({})).unwrap_err();
        assert!(e.contains("\"web\""), "{e}");
        assert_eq!(spec, before);
        // Without it, the same pod moves.
        spec["containers"].as_array_mut().unwrap().pop();
        assert_eq!(upgrade(&mut spec, json!({})), Ok(true));
    }

    #[test]
    fn an_installer_edited_since_is_an_error_and_nothing_changes() {
        let mut spec = legacy();
        spec["initContainers"][0]["args"] = json!(["install", "/elsewhere"]);
        let before = spec.clone();
        assert!(upgrade(&mut spec, json!({})).is_err());
        assert_eq!(spec, before);
    }
}
