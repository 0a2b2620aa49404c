"""What the ``demo`` profile's backgrounds are made of: Debian package files, their licences and credits.

Read by :mod:`aiplib.sources.corpora.demo` (stage 1 copies :data:`BG_SOURCES` and :data:`NOTICES`; its
``battery_specs`` turns :data:`BATTERY` into the background specs). Licences and credits are those
of the packages' Debian copyright and upstream README files.
"""
from __future__ import annotations

from dataclasses import dataclass

_MT = "games/minetest/games/minetest_game/mods"
_SP = "sonic-pi/samples"

NOTICES = {  # licence notices copied next to the audio (licence text, per-file credits)
    "minetest-data": [f"{_MT}/{m}/README.txt" for m in ("env_sounds", "fire", "default", "doors", "carts")],
    "sonic-pi-samples": [f"{_SP}/README.md"],
}


@dataclass(frozen=True)
class Src:
    """One file the demo copies from a Debian package, with its licence and credit."""

    package: str
    rel: str  # path under /usr/share
    licence: str
    attribution: str


def _srcs(package, rels, licence, attribution):
    return [Src(package, r, licence, attribution) for r in rels]


_FS = "freesound.org/people"
BG_SOURCES = {  # group → files; licence and credit from the packages' copyright / README files
    "water": _srcs("minetest-data", [f"{_MT}/env_sounds/sounds/env_sounds_water.{i}.ogg" for i in range(1, 5)],
                   "CC0 1.0", f"Yuval ({_FS}/Yuval/sounds/197023/), via Minetest Game"),
    "fire": _srcs("minetest-data", [f"{_MT}/fire/sounds/fire_fire.{i}.ogg" for i in range(1, 4)],
                  "CC BY 3.0", f"Dynamicell ({_FS}/Dynamicell/sounds/17548/), via Minetest Game"),
    "furnace": _srcs("minetest-data", [f"{_MT}/default/sounds/default_furnace_active.ogg"],
                     "CC0 1.0", f"iankath ({_FS}/iankath/sounds/173991/), via Minetest Game"),
    "splash": _srcs("minetest-data", [f"{_MT}/default/sounds/default_water_footstep.{i}.ogg" for i in range(1, 4)],
                    "CC BY 3.0", "AGFX (freesound.org/people/AGFX/packs/1253/), via Minetest Game"),
    "cart": _srcs("minetest-data", [f"{_MT}/carts/sounds/carts_cart_moving.{i}.ogg" for i in range(1, 4)],
                  "CC BY-SA 3.0", "Minetest Game contributors (Debian copyright of minetest-data, *.ogg)"),
    "doors": (_srcs("minetest-data", [f"{_MT}/doors/sounds/doors_door_open.ogg"], "CC BY 3.0",
                    "CGEffex, modified by BlockMen, via Minetest Game")
              + _srcs("minetest-data", [f"{_MT}/doors/sounds/doors_door_close.ogg"], "CC BY 3.0",
                      "bennstir, via Minetest Game")
              + _srcs("minetest-data", [f"{_MT}/doors/sounds/doors_steel_door_{s}.ogg" for s in ("open", "close")],
                      "CC BY 3.0", f"HazMattt ({_FS}/HazMattt/sounds/187283/), via Minetest Game")
              + _srcs("minetest-data", [f"{_MT}/doors/sounds/doors_fencegate_close.ogg"], "CC BY 3.0",
                      f"BarkersPinhead ({_FS}/BarkersPinhead/sounds/274807/) and rivernile7 "
                      f"({_FS}/rivernile7/sounds/249573/), via Minetest Game")),
    "sauna": _srcs("sonic-pi-samples", [f"{_SP}/ambi_sauna.flac"], "CC0 1.0",
                   f"hullum ({_FS}/hullum/sounds/415551/), via Sonic Pi"),
    "printer": _srcs("sonic-pi-samples", [f"{_SP}/loop_3d_printer.flac"], "CC0 1.0",
                     f"hullum ({_FS}/hullum/sounds/415571/), via Sonic Pi"),
    "vinyl": _srcs("sonic-pi-samples", [f"{_SP}/vinyl_hiss.flac"], "CC0 1.0",
                   f"veezay ({_FS}/veezay/sounds/130393/), via Sonic Pi"),
    "industrial": _srcs("sonic-pi-samples", [f"{_SP}/loop_industrial.flac"], "CC0 1.0",
                        f"godspine ({_FS}/godspine/sounds/222072/), via Sonic Pi"),
    "tabla": _srcs("sonic-pi-samples", [f"{_SP}/loop_tabla.flac"], "CC0 1.0",
                   f"lezaarth ({_FS}/lezaarth/sounds/242591/), via Sonic Pi"),
    "ski": _srcs("extremetuxracer-data", [f"games/etr/sounds/{s}_slide.wav" for s in ("snow", "mud", "rock", "grass")],
                 "GPL-2.0-or-later", "Extreme Tux Racer Team / Tuxracer (Jasmin F. Patry)"),
    "moh_cold_day": _srcs("asterisk-moh-opsound-g722", ["asterisk/moh/macroform-cold_day.g722"], "CC BY-SA 3.0",
                          "'Cold Day' by Paul Shuler (Macroform), Asterisk opsound music on hold"),
    "moh_morning_coffee": _srcs("asterisk-moh-opsound-g722", ["asterisk/moh/manolo_camp-morning_coffee.g722"],
                                "CC BY-SA 3.0", "'Morning Coffee' by Manolo Camp, Asterisk opsound music on hold"),
    "moh_system": _srcs("asterisk-moh-opsound-g722", ["asterisk/moh/reno_project-system.g722"], "CC BY-SA 3.0",
                        "'System' by Reno Project, Asterisk opsound music on hold"),
}

BATTERY = [  # bg_id, category, source group or synthetic kind, description, start_s
    ("fire_crackle", "stationary", "fire", "steady crackling fire", 0.0),
    ("furnace_roar", "stationary", "furnace", "low roar of a burning furnace", 0.0),
    ("printer_3d", "stationary", "printer", "3-D printer stepper motors whirring", 0.0),
    ("vinyl_hiss", "stationary", "vinyl", "vinyl record surface hiss and crackle", 0.0),
    ("cart_rails", "stationary", "cart", "mine cart rumbling along rails", 0.0),
    ("ski_slide", "stationary", "ski", "skis sliding over snow, mud, rock and grass", 0.0),
    ("white_noise", "stationary", "white", "synthetic white noise (control)", 0.0),
    ("pink_noise", "stationary", "pink", "synthetic pink (1/f) noise (control)", 0.0),
    ("brown_noise", "stationary", "brown", "synthetic brown (1/f²) noise (control)", 0.0),
    ("water_stream", "transient", "water", "rain-like water stream, splashing and trickling", 0.0),
    ("sauna_steam", "transient", "sauna", "sauna: bursts of water hissing on hot stones", 0.0),
    ("water_splash", "transient", "splash", "footsteps splashing through water", 0.0),
    ("industrial_clank", "transient", "industrial", "short industrial machine loop, rhythmic clanks", 0.0),
    ("door_slams", "transient", "doors", "wooden and steel doors and a gate opening and closing", 0.0),
    ("moh_cold_day", "music", "moh_cold_day", "electronic music-on-hold track 'Cold Day' (Macroform)", 30.0),
    ("moh_morning_coffee", "music", "moh_morning_coffee", "music-on-hold track 'Morning Coffee' (Manolo Camp)", 10.0),
    ("moh_system", "music", "moh_system", "music-on-hold track 'System' (Reno Project)", 30.0),
    ("tabla_loop", "music", "tabla", "tabla drum loop (percussion music)", 0.0),
]
